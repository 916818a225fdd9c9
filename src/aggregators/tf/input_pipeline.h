// Input pipeline analyzer (docs/semantics-tf.md §3): is the training
// input-bound, and where does the host spend its input time.
//
// A pure function over two things the pipeline already has: the step window
// (device-side statistics, §3.1-3.3, from StepBreakdown) and the host's
// input-op records (kInputSpan self times from OpStats, §3.4). It keeps no
// state, so the incremental and batch answers are the same by construction;
// the windows it sees are the step breakdown's.
#ifndef LIVEPROF_AGGREGATORS_TF_INPUT_PIPELINE_H_
#define LIVEPROF_AGGREGATORS_TF_INPUT_PIPELINE_H_

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/steps/step_breakdown.h"
#include "aggregators/tf/op_stats.h"
#include "base/json_writer.h"
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
enum class InputCategory : uint8_t { kEnqueue, kDemandedRead, kAdvancedRead, kPreprocessing, kUnknown, kNotInput };
std::string_view InputCategoryName(InputCategory c);
// The category of an input op from its stage, else from its tf.data name.
InputCategory CategorizeInputOp(std::string_view name, InputStage stage);

// What feeds the training loop, told by its input ops' names: a PyTorch
// DataLoader (its waits, `enumerate(DataLoader)#...__next__`, and the fetches
// liveprof run times in its workers, `DataLoader fetch#<Dataset>`) or tf.data
// (`Iterator::...`, `IteratorGetNext`). It picks the advice (what to try).
enum class InputSource : uint8_t { kUnknown, kPytorchDataLoader, kTfData };
std::string_view InputSourceId(InputSource s);    // "pytorch_dataloader", "tf_data", "unknown".
std::string_view InputSourceName(InputSource s);  // "PyTorch DataLoader", "tf.data", "".
InputSource InputSourceOf(std::string_view op_name);

// How the PyTorch view's DataLoader share and this analysis's input share
// relate (docs/analyses.md, "PyTorch's DataLoader as input"): both count the
// time the training loop spends in the DataLoader's __next__, less what a
// GPU op covers; they differ where (1) a runtime call runs inside __next__
// (pin_memory's copies: Runtime for the plugin, input here, as xprof ranks
// waiting for input above launches) and (2) the steps differ (the plugin
// extends a step to the end of its last GPU op, charging the next step's
// early DataLoader time to it; here a step is its ProfilerStep span). On the
// H200 slow-loader trace the two agree: 91.6 %.

// The DataLoader worker processes that serve the analysed one
// (Catalog::ServedProcess, docs/attach.md "DataLoader workers"): their
// fetches are their own time, never the training process's (its TF stats
// and host time leave them out). Each worker (by label: an epoch's new
// workers take the same) keeps its newest fetches as intervals, so that how
// busy the workers were over any step window can be told: busy = their
// fetch time / (window x workers).
struct LoaderWorkerRow {
  std::string label;      // "rank 0 · loader 1".
  uint64_t fetches = 0;   // fetches overlapping the window.
  uint64_t fetch_ns = 0;  // their time inside the window (overlaps counted once).
};
struct LoaderWorkersWindow {
  uint64_t window_ns = 0;                // the step window's wall time.
  std::vector<LoaderWorkerRow> workers;  // every worker seen, by label.
  uint64_t fetch_ns() const;
  // 100 x fetch time / (window x workers); 0 with no window or no worker.
  double busy_pct() const;
};

class LoaderWorkers {
 public:
  explicit LoaderWorkers(const Catalog* catalog, size_t max_fetches_per_worker = 16384)
      : catalog_(catalog), max_fetches_(max_fetches_per_worker) {}
  // The events of the processes serving the analysed one; their input spans
  // other than waits are fetches. Pipeline thread.
  void Consume(std::span<const Event> helper_events);
  // Each worker's fetches in [begin_ns, end_ns) (those older than the
  // newest max_fetches_per_worker are forgotten). Pipeline thread.
  LoaderWorkersWindow Window(uint64_t begin_ns, uint64_t end_ns) const;
  // The workers' input ops, by name (their self time = their duration), for
  // the host-side table: since the start, or ending in the last `window_ns`
  // of the newest fetch. Pipeline thread.
  std::vector<InputOpStats> Ops(uint64_t window_ns) const;
  bool empty() const { return workers_.empty(); }

 private:
  struct Fetch {
    uint64_t begin, end;
    NameId name;
    InputStage stage;
  };
  struct Worker {
    std::string label;
    std::deque<Fetch> fetches;  // completion order.
  };
  const Catalog* catalog_;
  size_t max_fetches_;
  std::vector<Worker> workers_;
  std::vector<std::pair<NameId, InputOpStats>> totals_;  // by name, since the start.
  uint64_t newest_end_ = 0;
};

// A DataLoader's workers were busy (they do not keep up) at or above this
// share of the window; below it, with the loop still waiting, the wait is
// the hand-off of each batch to the training process.
inline constexpr double kLoaderWorkersBusyPct = 50;

struct InputPipelineSnapshot {
  StepWindow window;  // device-side statistics.
  // Ratios of sums over the window (§3.2).
  // compute_pct: device compute; in a window with no device work (a CPU
  // job), host compute, so that its compute is not called idle
  // (`compute_on` "host").
  double input_pct = 0, output_pct = 0, compute_pct = 0, collectives_pct = 0, idle_pct = 0;
  double kernel_launch_pct = 0, all_other_pct = 0;
  bool compute_on_host = false;
  InputBound bound = InputBound::kUnknown;
  std::string statement;  // the bottleneck statement with its number.
  std::string next_step;  // "Look at the host-side breakdown..." / "You may skip...".
  std::string kernel_launch_level, all_other_level, collectives_level;
  std::vector<std::string> advice;  // kernel launch, all others, collectives statements.

  // Host side (§3.4), µs.
  double enqueue_us = 0, demanded_read_us = 0, advanced_read_us = 0, preprocessing_us = 0, unclassified_us = 0;
  bool input_ops_seen = false;  // any demanded / advanced / preprocessing time.
  // False when the categories are the input ops' self times rather than
  // xprof's scaling by the enqueue time: with host-to-device copies but no
  // enqueue op, that scaling makes every category 0 (§3.4 item 6).
  bool enqueue_scaled = false;
  InputSource source = InputSource::kUnknown;
  // The training loop's waits for input (stage kWait: IteratorGetNext, a
  // DataLoader's __next__): their time (a nested wait counted once), count,
  // and their names (a DataLoader's iterator class says how it loads).
  double wait_ms = 0;
  uint64_t waits = 0;
  std::vector<std::string> wait_names;
  bool single_process_loader = false;  // _SingleProcessDataLoaderIter: num_workers=0.
  // The DataLoader's worker processes over the step window, and what their
  // rows say: "busy" (at or above kLoaderWorkersBusyPct: add workers, make
  // batches cheaper), "handoff" (mostly idle while the loop waits: the wait
  // is the hand-off of each batch), "" (no workers seen).
  LoaderWorkersWindow workers;
  std::string loader_verdict;
  // "Input on" (§3.3's class) in words.
  std::string input_class_statement;
  std::string source_statement;  // what feeds the loop, and what the trace can tell of it.
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

// `workers`: the DataLoader's worker processes over the same steps (null:
// none known); their fetches are among `input_ops` already.
InputPipelineSnapshot AnalyzeInputPipeline(const StepWindow& window, std::span<const InputOpRecord> input_ops,
                                           const LoaderWorkersWindow* workers = nullptr);

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_TF_INPUT_PIPELINE_H_
