// `liveprof simulate`: the simulated GPU workload (src/producers/
// simulated_workload.h) through the stream and the analyses, printed once a
// second: the last 20 steps' time, breakdown and input classification, the
// drops, and every alert as it fires or resolves: what `liveprof demo`
// serves to the dashboard, on the console.
#ifndef LIVEPROF_APP_SIMULATE_H_
#define LIVEPROF_APP_SIMULATE_H_

#include "app/args.h"

namespace liveprof {

// Adds the subcommand simulate, with the workload's options and --seconds.
void AddSimulateCommand(CLI::App& app, Commands* commands);

}  // namespace liveprof

#endif  // LIVEPROF_APP_SIMULATE_H_
