// The liveprof command line (CLI11): what the commands share. main.cc builds
// one CLI::App; each command adds its subcommand (serve.h, analyze.h,
// simulate.h, main.cc) with its options, their defaults and checks, and a
// run to call once the whole line has parsed.
#ifndef LIVEPROF_APP_ARGS_H_
#define LIVEPROF_APP_ARGS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "producers/simulated_workload.h"

namespace liveprof {

// The subcommands and what each runs after a successful parse (returning
// the exit code).
struct Commands {
  std::vector<std::pair<const CLI::App*, std::function<int()>>> runs;
  void Add(const CLI::App* sub, std::function<int()> run) { runs.emplace_back(sub, std::move(run)); }
  // Subcommands that run another command (`liveprof run [options] -- COMMAND
  // ARGS...`): the words after the first `--` go to `words`, unparsed (the
  // job's own options are not ours).
  std::vector<std::pair<std::string, std::vector<std::string>*>> passthrough;
};

// A check (a transformer) for a number in [lo, hi], written as strtod reads
// it (1e6 is a million): a bad value fails with "'<value>': expected a number
// in [lo, hi]" (CLI11 puts the option's name first). With `integral` the
// value is truncated, as the hand-written parser did before CLI11.
CLI::Validator NumberIn(double lo, double hi, bool integral);

// "[lo, hi]", as %g writes them.
std::string RangeText(double lo, double hi);

// Adds `name` (e.g. "--port") for `target`, a number in [lo, hi] (said after
// `help`).
template <typename T>
CLI::Option* AddNumber(CLI::App* app, const std::string& name, T& target, double lo, double hi,
                       const std::string& help) {
  return app->add_option(name, target, help + "; a number in " + RangeText(lo, hi))
      ->transform(NumberIn(lo, hi, std::is_integral_v<T>));
}

// The simulated workload's options, shared by `simulate` and `demo`:
// --scenario balanced|input_bound|launch_bound|memory_growth|schedule,
// --rate R (events/s, 1e4..5e6), --seed N, --steps N, --workers W (simulated
// ranks 0..W-1, 1..64) and --straggler RANK (needs --workers: that rank runs
// 1.5x slower).
struct WorkloadArgs {
  SimulatedWorkloadOptions options;
  std::string scenario = "schedule";
};
void AddWorkloadOptions(CLI::App* app, WorkloadArgs* args);
// After parsing: the scenario as the model's schedule, the straggler checked
// against the workers. Throws CLI::ValidationError (so: exit 2) when wrong;
// call it from the subcommand's callback.
void FinishWorkloadOptions(WorkloadArgs* args);

// Parses the command line and runs the subcommand chosen. --help: the help
// of the (sub)command on stdout and 0; a parse or check error: "liveprof
// SUB: <message>" on stderr and 2; else the subcommand's exit code.
int ParseAndRun(CLI::App& app, const Commands& commands, int argc, char** argv);

}  // namespace liveprof

#endif  // LIVEPROF_APP_ARGS_H_
