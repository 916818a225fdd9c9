#include "app/args.h"

#include <cstdio>
#include <cstdlib>

namespace liveprof {

double NumberArg(int argc, char** argv, int& i, double lo, double hi, const char* command) {
  const char* opt = argv[i];
  if (i + 1 >= argc) {
    std::fprintf(stderr, "%s: %s needs a value\n", command, opt);
    std::exit(2);
  }
  const char* s = argv[++i];
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr, "%s: %s '%s': expected a number in [%g, %g]\n", command, opt, s, lo, hi);
    std::exit(2);
  }
  return v;
}

}  // namespace liveprof
