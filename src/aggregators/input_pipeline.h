// Input pipeline analyzer (tf-profiler-semantics.md §3): is the training
// input-bound, and where does the host spend its input time.
//
// A pure function over two things the pipeline already has: the step window
// (device-side statistics, §3.1-3.3, from StepBreakdown) and the host's
// input-op records (kInputSpan self times from OpStats, §3.4). It keeps no
// state, so the incremental and batch answers are the same by construction;
// the windows it sees are the step breakdown's.
#ifndef LIVEPROF_AGGREGATORS_INPUT_PIPELINE_H_
#define LIVEPROF_AGGREGATORS_INPUT_PIPELINE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_writer.h"
#include "aggregators/op_stats.h"
#include "aggregators/step_breakdown.h"
#include "stream/event.h"

namespace liveprof {

// §3.3 thresholds, in percent of the step time.
inline constexpr double kHighlyInputBoundPct = 20;
inline constexpr double kModeratelyInputBoundPct = 5;
inline constexpr double kPotentiallyAllOtherPct = 3;
inline constexpr double kHighKernelLaunchPct = 15, kModerateKernelLaunchPct = 3;
inline constexpr double kHighAllOtherPct = 15, kModerateAllOtherPct = 3;
inline constexpr double kHighCollectivesPct = 15, kModerateCollectivesPct = 3;

enum class InputBound : uint8_t { kUnknown, kHighly, kModerately, kPotentially, kNot };
std::string_view InputBoundName(InputBound b);  // "HIGHLY input-bound"...
// §3.3's class column: "host", "both", "device" (or "unknown").
std::string_view InputBoundClass(InputBound b);
InputBound ClassifyInputBound(double input_pct, double all_other_pct);
// "high" / "moderate" / "no" for the kernel-launch, all-others, collectives rows.
std::string_view Level(double pct, double high, double moderate);

// One host input op, as OpStats measured it.
using InputOpRecord = InputOpStats;

// §3.4 categories, in the order of the breakdown.
enum class InputCategory : uint8_t {
  kEnqueue, kDemandedRead, kAdvancedRead, kPreprocessing, kUnknown, kNotInput
};
std::string_view InputCategoryName(InputCategory c);
// The category of an input op from its stage, else from its tf.data name.
InputCategory CategorizeInputOp(std::string_view name, InputStage stage);

struct InputPipelineSnapshot {
  StepWindow window;  // device-side statistics.
  // Ratios of sums over the window (§3.2).
  double input_pct = 0, output_pct = 0, compute_pct = 0, collectives_pct = 0, idle_pct = 0;
  double kernel_launch_pct = 0, all_other_pct = 0;
  InputBound bound = InputBound::kUnknown;
  std::string statement;        // the bottleneck statement with its number.
  std::string next_step;        // "Look at the host-side breakdown..." / "You may skip...".
  std::string kernel_launch_level, all_other_level, collectives_level;
  std::vector<std::string> advice;  // kernel launch, all others, collectives statements.

  // Host side (§3.4), µs.
  double enqueue_us = 0, demanded_read_us = 0, advanced_read_us = 0, preprocessing_us = 0,
         unclassified_us = 0;
  bool input_ops_seen = false;  // any demanded / advanced / preprocessing time.
  struct OpRow {
    std::string name;
    uint64_t occurrences;
    double total_ms, self_ms, total_pct, self_pct;
    InputCategory category;
  };
  std::vector<OpRow> ops;  // by self time, descending; ties by name.
  std::vector<std::string> recommendations;

  void WriteJson(JsonWriter& w) const;
  std::string OpsCsv() const;
};

InputPipelineSnapshot AnalyzeInputPipeline(const StepWindow& window,
                                           std::span<const InputOpRecord> input_ops);

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_INPUT_PIPELINE_H_
