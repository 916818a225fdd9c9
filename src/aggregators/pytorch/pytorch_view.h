// PytorchView: the PyTorch profiler TensorBoard plugin's Overview page
// (torch_tb_profiler 0.4.3: step list, "step time breakdown", average step,
// GPU utilization, recommendations), re-implemented to give the plugin's
// numbers exactly. The rules are those of docs/semantics-pytorch.md
// (sections 1-4, 5, 6's items 1, 4 and 5); comments below cite its section
// numbers.
//
// The overview is a batch computation over a set of events (the plugin reads
// one trace file), so the core is the pure function ComputePytorchOverview().
// PytorchView only buffers the recent events (bounded; the oldest steps are
// dropped first) and runs that function on Snapshot().
//
// Mapping of our event kinds onto the plugin's trace categories (section 0.3):
//   kKernel                    Kernel (device = the GPU id for section 5)
//   kMemcpyHtoD..kMemcpyOther  Memcpy
//   kMemset                    Memset
//   kRuntimeApi                Runtime; `corr` links it to the device ops
//                              carrying the same `corr` (args["correlation"]).
//                              Driver calls (sub ApiLayer::kDriver, cuda_driver)
//                              are ignored, as the plugin ignores them.
//   kFrameworkOp               Operator
//   kHostSpan                  UserAnnotation (there is no Python category)
//   kInputSpan                 EXTENSION: DataLoader role directly, and counts
//                              as an Operator for the fallback step's extent
//                              (like the plugin's `enumerate(DataLoader)#...`
//                              cpu_op rows it stands for).
//   kStepMarker                ProfilerStep, number = payload.step.step_num.
//   every other kind           ignored.
// A kFrameworkOp or kHostSpan named `ProfilerStep#<int>` is a ProfilerStep;
// named `enumerate(DataLoader)#...` ending in `.__next__`, or
// `enumerate(DataPipe)#...`, it is DataLoader; named exactly one of the ten
// nccl:/gloo: collectives, it is Communication. A kernel is Communication
// when the name of its launching op (payload.kernel.op) is one of those ten:
// this stands in for the plugin's External-id match with a host comm op.
//
// Units: our times are integer ns; all interval arithmetic is done in integer
// ns (exact). Published values are µs as doubles (ns / 1000.0), which is
// exact for traces whose times are whole µs, so the plugin's float and
// rounding steps are reproduced bit for bit on such traces.
#ifndef LIVEPROF_AGGREGATORS_PYTORCH_PYTORCH_VIEW_H_
#define LIVEPROF_AGGREGATORS_PYTORCH_PYTORCH_VIEW_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/pytorch/py_format.h"
#include "aggregators/pytorch/pytorch_gpu_metrics.h"
#include "base/json_writer.h"
#include "stream/diagnostics.h"
#include "stream/event.h"

namespace liveprof {

// ---------------------------------------------------------------------------

// ProfileRole of the plugin (section 2), in carving order; kOther is what is
// left; Total is kept apart.
enum class PytorchRole : uint8_t {
  kKernel = 0,
  kMemcpy = 1,
  kMemset = 2,
  kCommunication = 3,
  kRuntime = 4,
  kDataLoader = 5,
  kCpuOp = 6,  // shown as "CPU Exec".
  kOther = 7,
};
inline constexpr size_t kPytorchRoleCount = 8;  // without Total.

// What the plugin's GPU rows count, as the dashboard and docs say it
// (docs/semantics-pytorch.md §5). liveprof's own GPU utilization is
// kGpuUtilizationDefinition (overview.h), its Tensor Core share
// kTensorCoresByFamilyDefinition (kernel_stats.h); they differ on purpose.
inline constexpr char kPluginGpuUtilizationDefinition[] =
    "the PyTorch plugin's: time at least one kernel ran (union over streams) within the kept steps, "
    "divided by their wall time (first kept step's start to last kept step's end); copies and memsets "
    "do not count";
inline constexpr char kPluginTensorCoresDefinition[] =
    "the PyTorch plugin's: time of the kernels an operator launched whose name is on its allowlist "
    "(h884, s1688, xmma_gemm, ...: Volta/Ampere names, none of Hopper's sm90 xmma or cuBLAS' nvjet), "
    "divided by all those kernels' time";

// The column title the plugin gives a role ("CPU Exec" for kCpuOp).
std::string_view PytorchRoleName(PytorchRole role);

struct PytorchViewOptions {
  // PytorchView: events kept in the buffer; beyond it the oldest steps'
  // events are dropped (and counted). Not used by ComputePytorchOverview.
  size_t max_events = 4'000'000;
  // The plugin's is_remove_tail_steps (always true there, section 1.4).
  bool remove_tail_steps = true;
};

struct PytorchOverviewStep {
  std::string name;           // "5" for ProfilerStep#5; "0" for the fallback step.
  int64_t host_start_ns = 0;  // the ProfilerStep span (section 1.1).
  int64_t host_end_ns = 0;
  int64_t start_ns = 0;  // adjusted bounds (section 1.3).
  int64_t end_ns = 0;
  uint64_t device_ops = 0;                            // device ops credited through its Runtimes (1.2).
  std::array<int64_t, kPytorchRoleCount> value_ns{};  // carved time in the step.
  int64_t total_ns = 0;                               // end_ns - start_ns.
  std::array<double, kPytorchRoleCount> value_us{};   // value_ns / 1000.0.
  double total_us = 0;
  // round(100 * value_us / total_us, 2); 0.0 when the total is 0.
  std::array<double, kPytorchRoleCount> pct{};
};

struct PytorchOverviewAverage {
  // Unrounded means over the kept steps (sum of step values in step order,
  // as doubles, divided by the step count).
  std::array<double, kPytorchRoleCount> value_us{};
  double total_us = 0;
  std::array<double, kPytorchRoleCount> rounded_us{};  // round(value_us).
  double total_rounded_us = 0;                         // "Average Step Time".
  // round(100 * value_us / total_us, 2); 0.0 when the average total is 0.
  std::array<double, kPytorchRoleCount> pct{};
};

struct PytorchOverviewGpu {
  uint8_t device = 0;
  double utilization = 0;      // |union of kernels ∩ W| / |W| (section 5).
  double utilization_pct = 0;  // round(100 * utilization, 2).
  // Static rows from the Catalog's kDeviceInfo, when it described the device.
  bool described = false;
  std::string name;
  uint64_t memory_bytes = 0;
  uint8_t cc_major = 0;
  uint8_t cc_minor = 0;
  // Est. SM Efficiency, Est. Achieved Occupancy, Kernel Time using Tensor
  // Cores (section 5), where the trace gives what they need.
  PytorchGpuEstimates estimates;
};

struct PytorchOverview {
  std::vector<PytorchOverviewStep> steps;  // kept steps, in order.
  PytorchOverviewAverage average;          // meaningful when steps is not empty.

  // Column flags (section 2, 4): the united role is non-empty anywhere.
  bool has_kernel = false;
  bool has_runtime = false;
  bool has_communication = false;
  bool has_memcpy_or_memset = false;
  bool show_gpu = false;  // has_runtime || has_kernel || has_memcpy_or_memset.
  // The shown roles in the plugin's column order (hidden roles are still part
  // of each step's total).
  std::vector<PytorchRole> columns;

  bool gpu_mode = false;       // some device op was credited to a step (1.3).
  bool fallback_step = false;  // no ProfilerStep: one step "0" (1.1).
  // Every considered event has whole-µs ts and dur: values print as integers,
  // as the plugin prints them for integer traces; otherwise as floats.
  bool integer_us = true;
  uint64_t dropped_tail_steps = 0;  // removed by section 1.4.
  int64_t window_start_ns = 0;      // W of section 5: first kept step start,
  int64_t window_end_ns = 0;        // last kept step end.

  std::vector<PytorchOverviewGpu> gpus;  // by device ordinal, ascending.
  // Recommendation texts (HTML fragments, section 6): items 1 (DataLoader),
  // 4 (communication) and 5 (low GPU utilization). Empty: "N/A".
  std::vector<std::string> recommendations;

  uint64_t bad_duration_events = 0;  // skipped spans (dur or ts over 2^62).
  uint64_t dropped_events = 0;       // PytorchView: dropped from the buffer.

  // "<ul><li>...</li></ul>" as the plugin publishes it ("<li>N/A</li>" if none).
  std::string RecommendationsHtml() const;
  // One JSON object close to the plugin's overview JSON: "steps" {"columns",
  // "rows"}, "performance", "recommendations", "environments",
  // "gpu_metrics", plus "liveprof" (our counters and flags).
  void WriteJson(JsonWriter& w) const;
  // The steps table: Step, the shown roles, Total (µs).
  std::string ToCsv() const;
};

// The plugin's overview over `events` (any order; they are stably sorted by
// ts as the plugin does). Names are resolved through `catalog`. Pure; any
// thread, as long as `catalog` is not being modified.
PytorchOverview ComputePytorchOverview(std::span<const Event> events, const Catalog& catalog,
                                       const PytorchViewOptions& options = {});

namespace pytorch {
class NameClassifier;
}  // namespace pytorch

class PytorchView {
 public:
  using Options = PytorchViewOptions;

  PytorchView(const Catalog* catalog, Diagnostics* diagnostics, Options options = {});
  ~PytorchView();

  // Buffers the kinds the overview uses; counts Diag::bad_duration for
  // absurd spans (skipped). When the buffer exceeds max_events it is cut at
  // a step start C (the oldest steps go first) so that at most half of
  // max_events remain: the buffer then always holds exactly the events with
  // ts >= C or end > C (later arrivals from before C are dropped too); every
  // dropped event is counted. Pipeline thread.
  void Consume(std::span<const Event> events);

  // The overview of the buffered events. Pipeline thread (the result is a
  // plain value any thread may read).
  PytorchOverview Snapshot() const;

  // The buffered events, in arrival order (tests, export).
  std::span<const Event> buffered() const { return events_; }
  uint64_t dropped_events() const { return dropped_events_; }
  // The current cut C (0 before the first compaction).
  uint64_t cut_ns() const { return cut_ns_; }

 private:
  void Compact();

  const Catalog* catalog_;
  // The step names' classes, kept from one compaction to the next (a
  // compaction classified every name of the buffer afresh).
  std::unique_ptr<pytorch::NameClassifier> names_;
  Diagnostics* diagnostics_;
  Options options_;
  std::vector<Event> events_;
  uint64_t dropped_events_ = 0;
  uint64_t bad_duration_ = 0;
  uint64_t cut_ns_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_PYTORCH_PYTORCH_VIEW_H_
