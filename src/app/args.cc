#include "app/args.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "producers/simulated_model.h"

namespace liveprof {

namespace {

// %g where it reads back the same (1e+07), else every digit (1048576).
std::string Number(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%g", v);
  if (std::strtod(s, nullptr) != v) std::snprintf(s, sizeof s, "%.17g", v);
  return s;
}

}  // namespace

std::string RangeText(double lo, double hi) { return "[" + Number(lo) + ", " + Number(hi) + "]"; }

CLI::Validator NumberIn(double lo, double hi, bool integral) {
  const std::string in = RangeText(lo, hi);
  return CLI::Validator(
      [lo, hi, integral, in](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !(v >= lo && v <= hi)) {
          return "'" + s + "': expected a number in " + in;
        }
        if (integral) s = std::to_string(static_cast<int64_t>(v));  // |v| < 2^63 for every range here.
        return {};
      },
      "");  // (AddNumber says the range in the option's help)
}

void AddWorkloadOptions(CLI::App* app, WorkloadArgs* a) {
  SimulatedWorkloadOptions& o = a->options;
  app->add_option("--scenario", a->scenario,
                  "balanced | input_bound | launch_bound | memory_growth | schedule (the schedule "
                  "cycles through all four)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            if (s == "schedule" || ParseScenario(s)) return {};
            return "'" + s + "': unknown (balanced, input_bound, launch_bound, memory_growth, schedule)";
          },
          "SCENARIO"));
  AddNumber(app, "--rate", o.events_per_second, 1e4, 5e6, "events per second (by default, 0: the model's own, ~7 k/s)");
  AddNumber(app, "--seed", o.model.seed, 0, 1e18, "the model's seed");
  AddNumber(app, "--steps", o.steps, 1, 1e12,
            "stop the workload after N training steps (demo: the server goes on serving; by default, 0: run "
            "until stopped)");
  AddNumber(app, "--workers", o.workers, 1, kMaxSimulatedWorkers,
            "simulate W training ranks for the pod view (by default, 0: one, this process)");
  AddNumber(app, "--straggler", o.straggler, 0, kMaxSimulatedWorkers - 1,
            "rank R (below --workers, which it needs) runs 1.5x slower than the others (by default, -1: none)");
}

void FinishWorkloadOptions(WorkloadArgs* a) {
  SimulatedWorkloadOptions& o = a->options;
  if (a->scenario == "schedule") {
    o.model.schedule = DefaultSchedule();
  } else {
    o.model.schedule = {{*ParseScenario(a->scenario), 1}};  // (checked while parsing)
  }
  if (o.straggler >= 0 && o.workers == 0) throw CLI::ValidationError("--straggler needs --workers W");
  if (o.straggler >= static_cast<int32_t>(o.workers)) {
    throw CLI::ValidationError("--straggler", "'" + std::to_string(o.straggler) + "': expected a rank in [0, " +
                                                  std::to_string(o.workers - 1) + "] (--workers " +
                                                  std::to_string(o.workers) + ")");
  }
}

int ParseAndRun(CLI::App& app, const Commands& commands, int argc, char** argv) {
  for (const auto& [name, words] : commands.passthrough) {
    if (argc < 2 || name != argv[1]) continue;
    for (int i = 2; i < argc; ++i) {
      if (std::string_view(argv[i]) != "--") continue;
      words->assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);  // the help of the subcommand asked, on stdout; 0.
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string who = app.get_name();
    for (const CLI::App* sub : app.get_subcommands()) who += " " + sub->get_name();
    std::cerr << who << ": ";
    app.exit(e);  // the message, on stderr.
    for (const auto& [name, words] : commands.passthrough) {
      if (argc >= 2 && name == argv[1] && words->empty()) {
        std::cerr << "(the job goes after --: liveprof " << name << " [OPTIONS] -- COMMAND [ARGS...])\n";
      }
    }
    return 2;
  }
  for (const CLI::App* sub : app.get_subcommands()) {
    for (const auto& [command, run] : commands.runs) {
      if (command == sub) return run();
    }
  }
  std::cerr << app.help();
  return 2;
}

}  // namespace liveprof
