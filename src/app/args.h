// Command-line helpers shared by the liveprof commands.
#ifndef LIVEPROF_APP_ARGS_H_
#define LIVEPROF_APP_ARGS_H_

#include "producers/simulated_workload.h"

namespace liveprof {

// Parses the value after option argv[i] as a number in [lo, hi] and advances
// i; on a missing or bad value prints "<command>: <option> '<value>':
// expected a number in [lo, hi]" and exits with 2.
double NumberArg(int argc, char** argv, int& i, double lo, double hi, const char* command);

// The simulated workload's options, shared by `simulate` and `demo`:
// --scenario balanced|input_bound|launch_bound|memory_growth|schedule,
// --rate R (events/s, 1e4..5e6), --seed N, --steps N, --workers W (simulated
// ranks 0..W-1, 1..64) and --straggler RANK (after --workers: that rank runs
// 1.5x slower). Returns true and advances i when
// argv[i] is one of them; a bad value is said ("<command>: ...") and exits 2.
bool WorkloadOption(int argc, char** argv, int& i, SimulatedWorkloadOptions* o, const char* command);

}  // namespace liveprof

#endif  // LIVEPROF_APP_ARGS_H_
