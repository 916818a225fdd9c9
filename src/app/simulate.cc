#include "app/simulate.h"

#include "app/args.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "aggregators/analyses.h"
#include "aggregators/input_pipeline.h"
#include "producers/simulated_workload.h"
#include "stream/clock.h"
#include "stream/drain_loop.h"

namespace liveprof {

namespace {

constexpr char kSimulateUsage[] =
    "usage: liveprof simulate [--scenario S] [--seconds N] [--rate R] [--seed N]\n"
    "  --scenario S   balanced | input_bound | launch_bound | memory_growth |\n"
    "                 schedule (default: the schedule that cycles through all four)\n"
    "  --seconds N    how long to run (default 20)\n"
    "  --rate R       events per second, 1e4..5e6 (default: the model's own, ~7 k/s)\n"
    "  --seed N       the model's seed (default 1)\n";

void PrintWindow(const StepWindow& w, uint64_t dropped) {
  if (w.steps == 0) {
    std::printf("  (no step closed yet)\n");
    return;
  }
  const double input = w.pct(Bucket::kInput);
  std::printf("  steps %" PRId64 "-%" PRId64 ": %6.2f ms/step | input %5.1f%% (%s) | compute %5.1f%% "
              "| launch %5.1f%% | collectives %4.1f%% | dropped %" PRIu64 "\n",
              w.first_step, w.last_step, w.step_ms.mean(), input,
              std::string(InputBoundName(ClassifyInputBound(input, w.pct(Bucket::kAllOthers)))).c_str(),
              w.pct(Bucket::kDeviceCompute), w.pct(Bucket::kKernelLaunch),
              w.pct(Bucket::kDeviceCollectives), dropped);
}

}  // namespace

int Simulate(int argc, char** argv) {
  SimulatedWorkloadOptions o;
  o.model.schedule = DefaultSchedule();
  double seconds = 20;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--scenario" && i + 1 < argc) {
      const std::string_view name = argv[++i];
      if (name == "schedule") continue;
      const std::optional<Scenario> s = ParseScenario(name);
      if (!s) {
        std::fprintf(stderr, "liveprof simulate: --scenario '%s': unknown\n%s", argv[i],
                     kSimulateUsage);
        return 2;
      }
      o.model.schedule = {{*s, 1}};
    } else if (a == "--seconds") {
      seconds = NumberArg(argc, argv, i, 0.1, 1e6, "liveprof simulate");
    } else if (a == "--rate") {
      o.events_per_second = NumberArg(argc, argv, i, 1e4, 5e6, "liveprof simulate");
    } else if (a == "--seed") {
      o.model.seed = static_cast<uint64_t>(NumberArg(argc, argv, i, 0, 1e18, "liveprof simulate"));
    } else {
      std::fprintf(stderr, "liveprof simulate: unknown option '%s'\n%s", argv[i], kSimulateUsage);
      return 2;
    }
  }

  Stream stream;
  AnalysesOptions ao;
  ao.env.device_type = "GPU (simulated)";
  ao.env.gpu_note =
      "simulated GPU workload (liveprof simulate, scenario schedule); no real GPU is traced";
  Analyses analyses(ao, &stream.diagnostics());
  std::mutex mu;  // the analyses live on the drain thread; main reads them.
  DrainLoop drain(stream, DrainLoop::Options{}, [&](const Batch& b) {
    std::lock_guard<std::mutex> lock(mu);
    analyses.SetStreamTotals(stream.TotalPublished(), stream.TotalDropped());
    analyses.Consume(b.definitions, b.events, b.late, b.watermark_ns, b.now_ns);
  });
  SimulatedWorkload workload(stream, o);
  drain.Start();
  workload.Start();
  std::printf("liveprof simulate: %.0f s of the simulated GPU workload (seed %" PRIu64 ")\n",
              seconds, o.model.seed);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::lock_guard<std::mutex> lock(mu);
    PrintWindow(analyses.breakdown().Snapshot(WindowSel{.last_steps = 20}).window,
                stream.TotalDropped());
    for (const AlertEvent& e : analyses.TakeAlertEvents()) {
      std::printf("  ALERT %s %s: %s\n", std::string(AlertEventStateName(e.state)).c_str(),
                  e.rule.c_str(), e.summary.c_str());
    }
  }
  workload.Stop();
  drain.Stop();
  std::lock_guard<std::mutex> lock(mu);
  analyses.Flush(HostNowNs());
  std::printf("done: %" PRIu64 " steps, %" PRIu64 " events analysed, %" PRIu64 " dropped\n",
              workload.steps_done(), analyses.events_consumed(), stream.TotalDropped());
  return 0;
}

}  // namespace liveprof
