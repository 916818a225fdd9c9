// SimulatedModel: a GPU training loop as CUPTI and the host API would record
// it, one step at a time, with no GPU. It drives the demo and most tests on
// machines without a GPU (this one), so its events have the shape of real
// ones: per step
//
//   host (main thread)  IteratorGetNext (input wait) | cudaMemcpyAsync |
//                       framework ops, each around its cudaLaunchKernel /
//                       cudaMemsetAsync calls | cudaStreamSynchronize
//   host (loader)       file reads and preprocessing of the next batch
//   device              the batch's H2D copy, forward and backward kernels
//                       (gemm, conv, elementwise, reductions) on 1-3 streams,
//                       memsets, an NCCL all-reduce, the optimizer's kernels
//   memory              activations allocated forward, freed backward; the
//                       memory-growth scenario also leaks a growing block
//   the step marker     kStepMarker "train_step", step_num = the index
//
// Kernels start no earlier than their launch API ends plus a launch latency
// and their stream is free; every device event carries its launch's
// correlation id; kernels carry the framework op that launched them.
//
// Scenarios (what each is built to show, checked by the tests):
//   kBalanced      device-bound: input < 5 % of the step (NOT input-bound).
//   kInputBound    the step waits for data: input >= 30 % (HIGHLY input-bound).
//   kLaunchBound   hundreds of tiny kernels; the device waits on launches.
//   kMemoryGrowth  balanced compute, device memory in use climbs toward
//                  capacity (a leak), then drops when it is "released".
// A schedule switches between them by step so that alerts fire and resolve.
//
// Deterministic: the events of step i depend only on (options, i). Pure: no
// I/O, no threads, no clock; names are interned in the NameTable given.
#ifndef LIVEPROF_PRODUCERS_SIMULATED_MODEL_H_
#define LIVEPROF_PRODUCERS_SIMULATED_MODEL_H_

#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "stream/event.h"
#include "stream/name_table.h"

namespace liveprof {

enum class Scenario : uint8_t { kBalanced, kInputBound, kLaunchBound, kMemoryGrowth };

std::string_view ScenarioName(Scenario s);
// "balanced", "input_bound" (or "input-bound"), "launch_bound", "memory_growth".
std::optional<Scenario> ParseScenario(std::string_view name);

// Which scenario runs at which step: each phase for `steps` steps, in order,
// then the list repeats.
struct ScenarioPhase {
  Scenario scenario = Scenario::kBalanced;
  uint32_t steps = 1;
};
// The demo's default: balanced, input-bound, balanced, launch-bound,
// memory growth; 60 steps each, so each alert fires and then resolves.
std::vector<ScenarioPhase> DefaultSchedule();

struct SimulatedModelOptions {
  uint64_t seed = 1;
  std::vector<ScenarioPhase> schedule = {{Scenario::kBalanced, 1}};
  uint32_t streams = 2;           // GPU streams, 1..3.
  uint64_t step_ns = 50'000'000;  // device compute per step (balanced); the
                                  // input wait comes on top of it.
  uint32_t ops_per_step = 48;     // framework ops (forward + backward + update).
  uint32_t kernels_per_op = 3;
  uint64_t batch_bytes = 64ull << 20;      // H2D copy per step.
  uint64_t memory_capacity = 40ull << 30;  // the simulated GPU's memory.
  uint8_t device = 0;
  // Tracks the caller registered: the training thread, the data loader, and
  // one per GPU stream (streams of them).
  TrackId main_track = 1;
  TrackId loader_track = 2;
  std::array<TrackId, 3> stream_tracks = {3, 4, 5};
};

// The events of one step, split by who would record them.
struct SimulatedStep {
  uint64_t begin_ns = 0;  // the step marker's begin.
  uint64_t end_ns = 0;    // the step marker's end (the next step begins here).
  Scenario scenario = Scenario::kBalanced;
  std::vector<Event> host;    // host spans, allocations, the marker; by end.
  std::vector<Event> device;  // kernels, copies, memsets; by end.
};

class SimulatedModel {
 public:
  // Interns its names in `names` (kept by pointer; it must outlive the model).
  SimulatedModel(SimulatedModelOptions options, NameTable* names);

  // The next step, beginning where the previous one ended (`start_ns` for the
  // first). Call in order: memory growth carries over between steps.
  SimulatedStep Next(uint64_t start_ns);

  // The scenario that runs at step `index` of the schedule.
  Scenario ScenarioAt(uint64_t index) const;
  uint64_t steps_made() const { return step_; }
  // The kDeviceInfo event of the simulated GPU (its name, memory, SMs, sm_80).
  Event DeviceInfo(uint64_t ts) const;

 private:
  SimulatedModelOptions options_;
  NameTable* names_;
  // The framework op of a layer, forward or backward; interned once.
  NameId OpName(uint32_t layer, bool backward);

  std::vector<NameId> ids_;     // fixed names, then per layer kind its kernels.
  std::vector<NameId> op_ids_;  // by layer * 2 + backward; 0 = not interned yet.
  uint64_t step_ = 0;
  uint32_t next_corr_ = 1;
  std::vector<uint64_t> leaked_;  // memory growth: blocks never freed so far.
  uint64_t next_address_ = 0x7f0000000000;
};

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_SIMULATED_MODEL_H_
