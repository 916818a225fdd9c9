#include "app/args.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "producers/simulated_model.h"

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

bool WorkloadOption(int argc, char** argv, int& i, SimulatedWorkloadOptions* o, const char* command) {
  const std::string_view a = argv[i];
  if (a == "--rate") {
    o->events_per_second = NumberArg(argc, argv, i, 1e4, 5e6, command);
  } else if (a == "--steps") {
    o->steps = static_cast<uint64_t>(NumberArg(argc, argv, i, 1, 1e12, command));
  } else if (a == "--workers") {
    o->workers = static_cast<uint32_t>(NumberArg(argc, argv, i, 1, kMaxSimulatedWorkers, command));
  } else if (a == "--straggler") {
    // After --workers, so that the rank is checked against them here.
    if (o->workers == 0) {
      std::fprintf(stderr, "%s: --straggler needs --workers W before it\n", command);
      std::exit(2);
    }
    o->straggler = static_cast<int32_t>(NumberArg(argc, argv, i, 0, o->workers - 1, command));
  } else if (a == "--seed") {
    o->model.seed = static_cast<uint64_t>(NumberArg(argc, argv, i, 0, 1e18, command));
  } else if (a == "--scenario") {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: --scenario needs a value\n", command);
      std::exit(2);
    }
    const std::string_view name = argv[++i];
    if (name == "schedule") {
      o->model.schedule = DefaultSchedule();
    } else if (const std::optional<Scenario> s = ParseScenario(name)) {
      o->model.schedule = {{*s, 1}};
    } else {
      std::fprintf(stderr,
                   "%s: --scenario '%s': unknown (balanced, input_bound, launch_bound, memory_growth, "
                   "schedule)\n",
                   command, argv[i]);
      std::exit(2);
    }
  } else {
    return false;
  }
  return true;
}

}  // namespace liveprof
