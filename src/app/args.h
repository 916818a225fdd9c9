// Command-line helpers shared by the liveprof commands.
#ifndef LIVEPROF_APP_ARGS_H_
#define LIVEPROF_APP_ARGS_H_

namespace liveprof {

// Parses the value after option argv[i] as a number in [lo, hi] and advances
// i; on a missing or bad value prints "<command>: <option> '<value>':
// expected a number in [lo, hi]" and exits with 2.
double NumberArg(int argc, char** argv, int& i, double lo, double hi, const char* command);

}  // namespace liveprof

#endif  // LIVEPROF_APP_ARGS_H_
