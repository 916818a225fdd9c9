#include "app/simulate.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include "aggregators/tf/input_pipeline.h"
#include "pipeline/pipeline.h"
#include "producers/simulated_workload.h"

namespace liveprof {

namespace {

void PrintWindow(const StepWindow& w, uint64_t dropped) {
  if (w.steps == 0) {
    std::printf("  (no step closed yet)\n");
    return;
  }
  const double input = w.pct(Bucket::kInput);
  std::printf("  steps %" PRId64 "-%" PRId64
              ": %6.2f ms/step | input %5.1f%% (%s) | compute %5.1f%% "
              "| launch %5.1f%% | collectives %4.1f%% | dropped %" PRIu64 "\n",
              w.first_step, w.last_step, w.step_ms.mean(), input,
              std::string(InputBoundName(ClassifyInputBound(input, w.pct(Bucket::kAllOthers)))).c_str(),
              w.pct(Bucket::kDeviceCompute), w.pct(Bucket::kKernelLaunch), w.pct(Bucket::kDeviceCollectives), dropped);
}

int Simulate(const SimulatedWorkloadOptions& o, double seconds) {
  Stream stream;
  Pipeline::Options po;
  po.analyses.env.device_type = "GPU (simulated)";
  po.analyses.env.gpu_note = "simulated GPU workload (liveprof simulate, scenario schedule); no real GPU is traced";
  Pipeline pipeline(stream, po);
  SimulatedWorkload workload(stream, o);
  pipeline.Start();
  workload.Start();
  std::printf("liveprof simulate: %.0f s of the simulated GPU workload (seed %" PRIu64 ")\n", seconds, o.model.seed);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    // The newest publication: its metrics hold the last 20 steps' window.
    if (const auto latest = pipeline.Latest()) {
      PrintWindow(latest->metrics.window, latest->metrics.events_dropped);
    }
    for (const AlertEvent& e : pipeline.TakeAlertEvents()) {
      std::printf("  ALERT %s %s: %s\n", std::string(AlertEventStateName(e.state)).c_str(), e.rule.c_str(),
                  e.summary.c_str());
    }
  }
  workload.Stop();
  pipeline.Stop();  // closes every step and publishes once more.
  std::printf("done: %" PRIu64 " steps, %" PRIu64 " events analysed, %" PRIu64 " dropped\n", workload.steps_done(),
              pipeline.Latest()->metrics.events_consumed, stream.TotalDropped());
  return 0;
}

}  // namespace

void AddSimulateCommand(CLI::App& app, Commands* commands) {
  struct SimulateArgs {
    WorkloadArgs workload;
    double seconds = 20;
  };
  auto a = std::make_shared<SimulateArgs>();
  CLI::App* sub = app.add_subcommand(
      "simulate", "run the simulated GPU workload through the analyses and print the breakdown each second");
  AddNumber(sub, "--seconds", a->seconds, 0.1, 1e6, "how long to run");
  AddWorkloadOptions(sub, &a->workload);
  sub->callback([a] { FinishWorkloadOptions(&a->workload); });
  commands->Add(sub, [a] { return Simulate(a->workload.options, a->seconds); });
}

}  // namespace liveprof
