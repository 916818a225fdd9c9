// Analyses: the pipeline thread's consumer. It feeds every aggregator from
// the drain loop's batches in one direction:
//
//   batch ─► Catalog (definitions)
//         ─► OpStats, KernelStats, DeviceUtilization, MemoryState, PytorchView
//            (every event, as it comes)
//         ─► StepAssembler ─► closed steps ─► StepBreakdown
//         ─► PodView (a StepAssembler and breakdown per worker)
//         ─► AlertEngine (after closed steps, and on a tick)
//
// and renders the views (overview, steps, input_pipeline, tf_stats,
// kernel_stats, memory, alerts, status, pod, pytorch) as JSON view models
// {"type", "v", "seq", ...} for the web layer, which only ever sees the
// rendered, immutable result.
//
// Not thread-safe: the pipeline thread owns it. Render() returns a value the
// owner publishes (shared_ptr<const RenderedViews>) for other threads.
#ifndef LIVEPROF_AGGREGATORS_ANALYSES_H_
#define LIVEPROF_AGGREGATORS_ANALYSES_H_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "aggregators/alerts/alerts.h"
#include "aggregators/catalog.h"
#include "aggregators/gpu_handoffs.h"
#include "aggregators/pytorch/annotation_stats.h"
#include "aggregators/pytorch/module_stats.h"
#include "aggregators/pytorch/pytorch_view.h"
#include "aggregators/status_view.h"
#include "aggregators/steps/device_utilization.h"
#include "aggregators/steps/step_breakdown.h"
#include "aggregators/steps/steps.h"
#include "aggregators/tf/input_pipeline.h"
#include "aggregators/tf/kernel_stats.h"
#include "aggregators/tf/memory_state.h"
#include "aggregators/tf/op_stats.h"
#include "aggregators/tf/overview.h"
#include "aggregators/tf/pod_view.h"
#include "aggregators/views.h"
#include "aggregators/worker_filter.h"
#include "base/self_cost.h"
#include "stream/diagnostics.h"

namespace liveprof {

struct AnalysesOptions {
  StepAssembler::Options steps;
  StepBreakdown::Options breakdown;
  OpStatsOptions op_stats;
  KernelStatsOptions kernels;
  DeviceUtilizationOptions utilization;
  MemoryStateOptions memory;
  bool pytorch_view = true;
  PytorchViewOptions pytorch{.max_events = 1'000'000};
  // The pod view's windows and caps. Its workers' step detection (pattern,
  // close lag) and breakdown mode follow `steps` and `breakdown`.
  PodViewOptions pod;
  std::vector<AlertRule> alert_rules = DefaultAlertRules();
  uint64_t alert_tick_ns = 250'000'000;  // alerts are evaluated at least this often.
  RunEnvironment env;                    // hostname, notes; devices come from the stream.
  // Times each analysis on every batch (the status view's "pipeline_cost":
  // the pipeline thread's time per analysis, its longest batch): a monotonic
  // clock in ns. Null (tests, `analyze`): not timed.
  uint64_t (*clock_ns)() = nullptr;
};

// What a render covers: the window of the step views, of the tables.
struct RenderOptions {
  WindowSel steps{.last_steps = 100};
  uint64_t table_window_ns = 0;  // 0: since start.
  bool include_idle = true;
  // The alerts view's history: the newest this many transitions (the engine
  // keeps more; alerts flapping on short steps would make the view large).
  size_t alert_history = 100;
  // The views the table delivers on request (views.h: kOnRequest, the
  // PyTorch view: a batch recompute) too.
  bool on_request = false;
  bool csv = false;  // the tables as CSV too (for downloads): on request only.
  // A render for the periodic publication takes the next seq. An answer to
  // one request (other options) keeps the last one, so that the feed's seq
  // stays gapless.
  bool advance_seq = true;
};

// Rendered JSON view models, one string per view of the table (views.h:
// `overview`, `steps`...) and, for the views with a table, its CSV when
// RenderOptions::csv asked for it (`tf_stats_csv`...). Immutable once built.
struct RenderedViews {
  uint64_t seq = 0;
  // Every event that ended at or before this (host clock, ns) is reflected.
  uint64_t watermark_ns = 0;
#define LIVEPROF_RENDERED_VIEW(name, ...) std::string name, name##_csv;
  LIVEPROF_VIEWS(LIVEPROF_RENDERED_VIEW)
#undef LIVEPROF_RENDERED_VIEW

  const std::string& json(View view) const;
  std::string& json(View view) { return const_cast<std::string&>(std::as_const(*this).json(view)); }
  const std::string& csv(View view) const;
  std::string& csv(View view) { return const_cast<std::string&>(std::as_const(*this).csv(view)); }
};

inline const std::string& RenderedViews::json(View view) const {
  switch (view) {
#define LIVEPROF_VIEW_JSON(name, id, ...) \
  case View::id: return name;
    LIVEPROF_VIEWS(LIVEPROF_VIEW_JSON)
#undef LIVEPROF_VIEW_JSON
  }
  return overview;  // (every enumerator is a case above)
}

inline const std::string& RenderedViews::csv(View view) const {
  switch (view) {
#define LIVEPROF_VIEW_CSV(name, id, ...) \
  case View::id: return name##_csv;
    LIVEPROF_VIEWS(LIVEPROF_VIEW_CSV)
#undef LIVEPROF_VIEW_CSV
  }
  return overview_csv;
}

class Analyses {
 public:
  // `diag` is the session's diagnostics table (the stream's), shown with
  // every snapshot; it must outlive this object.
  Analyses(AnalysesOptions options, Diagnostics* diag);

  // One drain-loop batch. Pipeline thread.
  void Consume(std::span<const Event> definitions, std::span<const Event> events, std::span<const Event> late,
               uint64_t watermark_ns, uint64_t now_ns);
  // End of stream: closes every step. Pipeline thread.
  void Flush(uint64_t now_ns);
  // What only the status view shows (status_view.h): the stream's totals
  // (the drop alerts read them too), the drain thread's backlog, each
  // producer ring's totals, liveprof's own cost. Pipeline thread.
  void SetStreamTotals(uint64_t published, uint64_t dropped) { status_.SetStreamTotals(published, dropped); }
  void SetPipelineBacklog(uint64_t queued, uint64_t max_queued) { status_.SetPipelineBacklog(queued, max_queued); }
  void SetSources(std::vector<SourceTotals> sources, uint64_t now_ns) {
    status_.SetSources(std::move(sources), now_ns);
  }
  void SetSelfCost(SelfCostSample sample) { status_.SetSelfCost(std::move(sample)); }
  const SelfCostSample& self_cost() const { return status_.self_cost(); }
  // The job's state (status "job_state"); kFinished stops the stall clock.
  void SetJobState(JobState state);
  // Replaces the alert rules (their states carry over by name). Pipeline thread.
  void SetAlertRules(std::vector<AlertRule> rules);
  // Alert transitions since the last call. Pipeline thread.
  std::vector<AlertEvent> TakeAlertEvents();
  // The pod's worker steps since the last call (options.pod.max_new_steps
  // > 0: a fleet agent's). Pipeline thread.
  std::vector<PodNewStep> TakeNewPodSteps() { return pod_.TakeNewSteps(); }

  // Every view as JSON. Pipeline thread; the result is a plain value.
  RenderedViews Render(const RenderOptions& options);

  const Catalog& catalog() const { return catalog_; }
  const GpuHandoffs& gpu_handoffs() const { return gpu_handoffs_; }
  const StepBreakdown& breakdown() const { return breakdown_; }
  const StepAssembler& steps() const { return steps_; }
  OpStats& op_stats() { return op_stats_; }
  const KernelStats& kernel_stats() const { return kernels_; }
  const MemoryState& memory() const { return memory_; }
  const DeviceUtilization& utilization() const { return utilization_; }
  const PodView& pod() const { return pod_; }
  // The alert rules and their states (Snapshot() gives a plain value).
  const AlertEngine& alerts() const { return alerts_; }
  uint64_t events_consumed() const { return events_consumed_; }
  // Per Analysis (all zero without AnalysesOptions::clock_ns).
  const std::array<AnalysisCost, static_cast<size_t>(Analysis::kCount)>& costs() const { return costs_; }
  // Adds `ns` of the pipeline thread's time to `a` (the pipeline's own
  // stages; ignored without AnalysesOptions::clock_ns). Pipeline thread.
  void AddCost(Analysis a, uint64_t ns);

 private:
  // Runs `f`, its time added to `a`'s cost when timed.
  template <typename F>
  void Timed(Analysis a, F&& f);
  class Metrics;  // the MetricSource the alert rules read.
  // Takes the closed steps; evaluates the alerts if any closed (or
  // `pod_steps`: a worker's step closed in the pod view).
  void CloseSteps(bool pod_steps);
  // `part` without spans of a bad duration (counted once here); may point
  // into clean_.
  std::span<const Event> DropBadSpans(std::span<const Event> part);
  void EvaluateAlerts(uint64_t now_ns, bool force);

  AnalysesOptions options_;
  Diagnostics* diag_;
  Catalog catalog_;
  StepAssembler steps_;
  StepBreakdown breakdown_;
  OpStats op_stats_;
  KernelStats kernels_;
  DeviceUtilization utilization_;
  MemoryState memory_;
  ModuleStats modules_;
  AnnotationStats annotations_;
  GpuHandoffs gpu_handoffs_;      // every worker's: whose GPU data, when.
  LoaderWorkers loader_workers_;  // the analysed worker's DataLoader workers (worker_.helpers()).
  std::optional<PytorchView> pytorch_;
  PodView pod_;
  AlertEngine alerts_;
  std::vector<AlertEvent> alert_events_;
  std::vector<Event> clean_;
  WorkerFilter worker_;  // the worker every view but the pod follows.

  uint64_t events_consumed_ = 0;
  std::array<AnalysisCost, static_cast<size_t>(Analysis::kCount)> costs_{};
  uint64_t watermark_ns_ = 0;
  uint64_t now_ns_ = 0;
  uint64_t last_alert_ns_ = 0;
  uint64_t last_step_end_ns_ = 0;
  JobState job_state_ = JobState::kLive;
  uint64_t finished_ns_ = 0;  // now_ns_ when kFinished was first set; 0 otherwise.
  int64_t last_step_num_ = -1;
  // (now, dropped, late) samples for the "during the window" metrics.
  struct CounterSample {
    uint64_t now_ns, dropped, late;
  };
  std::deque<CounterSample> counter_history_;
  StatusView status_;
  uint64_t seq_ = 0;
  // The last rendered size of each view (overview, steps, input_pipeline,
  // tf_stats, kernel_stats, memory, alerts, pytorch, status, pod): the next
  // render allocates once.
  std::array<size_t, kViewCount> view_size_hint_{};
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_ANALYSES_H_
