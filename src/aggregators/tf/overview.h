// Overview page (docs/semantics-tf.md §4-5): the performance summary,
// the step-time graph, the top-10 device ops, the run environment and the
// recommendation, plus the patterns TensorFlow's GPU performance guide
// teaches users to look for by eye (idle gaps between steps, tiny kernels
// while the device waits, ops on the host, copies per step, collectives),
// each with the numbers that triggered it.
//
// A pure function of the other views' snapshots: no state of its own.
#ifndef LIVEPROF_AGGREGATORS_TF_OVERVIEW_H_
#define LIVEPROF_AGGREGATORS_TF_OVERVIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/steps/device_utilization.h"
#include "aggregators/steps/step_breakdown.h"
#include "aggregators/steps/steps.h"
#include "aggregators/tf/input_pipeline.h"
#include "aggregators/tf/kernel_stats.h"
#include "aggregators/tf/op_stats.h"
#include "base/json_writer.h"

namespace liveprof {

// §5: below this 16-bit share of device compute, say so.
inline constexpr double kLowPrecisionPct = 10;

// liveprof's GPU utilization, one definition wherever it is shown (Overview,
// `liveprof analyze`, the gpu_utilization_pct alert, the PyTorch page beside
// the plugin's own figure): DeviceUtilization's busy / span, summed over GPUs.
inline constexpr char kGpuUtilizationDefinition[] =
    "time the GPU ran a kernel, copy or memset (union over streams) divided by the time from its first "
    "to its last activity in the window (the wall time, gaps between steps and loops included)";

// One detected pattern: what, how bad, and the numbers behind it.
struct Pattern {
  std::string id;        // "idle_gaps_between_steps", "tiny_kernels"...
  std::string severity;  // "high" / "moderate".
  std::string text;      // the finding with its numbers and what to do.
  std::vector<std::pair<std::string, double>> numbers;
};

struct RunEnvironment {
  std::string hostname;
  std::string device_type;  // "Nvidia GPU (Ampere)", "GPU", "CPU".
  uint32_t device_core_count = 0;
  std::vector<DeviceDef> devices;
  std::string step_source;  // which step markers were found.
  std::string breakdown_mode;
  std::string gpu_note;    // e.g. why there is no GPU activity (CUPTI missing...).
  std::string opened_run;  // liveprof open: the run folder read back ("" when live).
};

// The run environment as a JSON object (in the overview and status views).
void WriteRunEnvironment(JsonWriter& w, const RunEnvironment& env);

struct TopOp {
  std::string name, type;
  double self_us = 0, self_pct = 0, cumulative_pct = 0;
  bool tc_eligible = false, uses_tc = false;
};

struct OverviewSnapshot {
  StepWindow window;
  InputBound bound = InputBound::kUnknown;
  std::string statement, next_step;
  std::vector<std::string> advice;
  std::string precision_statement;
  double host_op_pct = 0;  // host op occurrences / all op occurrences (§4).
  double device_op_pct = 0;
  // The job has (had) a device: a GPU known to the catalog, device activity
  // or a step with device work. Without one, the pages show host views.
  bool has_device = false;
  // Top 10 ops by self time, IDLE excluded: the device's; with no device,
  // the host's named ops (top_ops_side "host"), unattributed time left out.
  std::vector<TopOp> top_ops;
  std::string_view top_ops_side = "device";
  double gpu_utilization_pct = -1;         // union busy / span over the devices; -1 without GPU.
  uint64_t gpu_utilization_window_ns = 0;  // the devices' window (0 = since start).
  RunEnvironment env;
  std::vector<Pattern> patterns;
  void WriteJson(JsonWriter& w) const;
};

struct OverviewInputs {
  const StepWindow* window;
  const InputPipelineSnapshot* input;
  const OpStatsSnapshot* ops;  // with or without IDLE rows: the top 10 skip them.
  const KernelStatsSnapshot* kernels;
  const DeviceUtilizationSnapshot* utilization;
  RunEnvironment env;
  uint64_t small_kernel_ns = 40'000;
};

OverviewSnapshot BuildOverview(const OverviewInputs& in);

// "Nvidia GPU (Ampere)" from a compute capability (§12); "GPU" if unknown.
std::string GpuModelName(uint8_t cc_major, uint8_t cc_minor);

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_TF_OVERVIEW_H_
