// MetricsInput: the plain values the /metrics page shows (the Prometheus
// renderer lives in web/metrics.h), collected from the analyses on the
// pipeline thread and published with each snapshot, so the web threads never
// read aggregator state.
#ifndef LIVEPROF_PIPELINE_METRICS_INPUT_H_
#define LIVEPROF_PIPELINE_METRICS_INPUT_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "aggregators/alerts/alerts.h"
#include "aggregators/analyses.h"
#include "aggregators/steps/step_breakdown.h"
#include "aggregators/tf/input_pipeline.h"
#include "stream/stream.h"

namespace liveprof {

// The step window the gauges describe: the last 20 steps, as the input-bound
// alert rules use.
inline constexpr uint32_t kMetricsWindowSteps = 20;

// One producer ring's counters (rings sharing a name are summed when rendered).
using MetricsSource = SourceTotals;

// One alert rule's state.
struct MetricsAlert {
  std::string rule;
  AlertSeverity severity = AlertSeverity::kWarning;
  bool firing = false;  // firing or resolving (still firing, docs/alerts.md).
};

// Events an ingest source sent that the server refused alone (a name or
// track never defined...; docs/ingest.md, "Refusals"), by source (its ring's
// name, "ingest rank 3") and reason ("undefined_track").
struct MetricsRefusal {
  std::string source;
  std::string reason;
  uint64_t events = 0;
};

// liveprof's own cost in an ingest source's process (IngestBatch.cost: its
// /proc, read by its sender), by source (its ring's name, "ingest rank 3"):
// each liveprof thread's CPU since it started, and the process's resident set;
// the time liveprof's hooks in the program measured themselves spending.
struct MetricsSourceCost {
  std::string source;
  std::vector<ThreadCpu> threads;
  uint64_t rss_bytes = 0;
  uint64_t hook_ns = 0;
  uint64_t cupti_overhead_ns = 0;  // CUPTI's own time (its OVERHEAD records).
};

// Step times at the 50th, 90th and 99th percentile, seconds.
struct StepTimeQuantiles {
  double p50 = 0, p90 = 0, p99 = 0;
};

struct MetricsInput {
  std::string version;  // liveprof's version, for liveprof_build_info.
  // The last kMetricsWindowSteps steps. Its families are left out when
  // window.steps == 0.
  StepWindow window;
  StepTimeQuantiles step_time;                      // of the window's step times.
  std::array<double, kBucketCount> bucket_ratio{};  // Σ bucket / Σ step time, 0..1.
  double input_ratio = 0;                           // Σ input / Σ step time, 0..1.
  InputBound input_bound = InputBound::kUnknown;
  uint64_t steps_closed = 0;
  uint64_t events_consumed = 0;
  uint64_t late_events = 0;
  uint64_t events_published = 0;  // the stream's totals, removed rings included.
  uint64_t events_dropped = 0;
  // Events drained, queued for the pipeline thread (DrainLoop::handoff_queued).
  uint64_t pipeline_backlog_events = 0;
  std::vector<MetricsSource> sources;
  std::vector<MetricsAlert> alerts;  // in rule order.
  // liveprof's own threads in the server (their CPU since they started)
  // and the process's resident set; empty / 0 before the first sample.
  std::vector<ThreadCpu> self_threads;
  uint64_t self_rss_bytes = 0;
  // Not from the analyses: filled on the web thread for each /metrics request
  // (ServerOptions::ingest_refused), sorted by source, then reason.
  std::vector<MetricsRefusal> ingest_refused;
  // Also from the web thread (ServerOptions::ingest_cost): the connected
  // ingest sources' own cost, sorted by source.
  std::vector<MetricsSourceCost> ingest_cost;
};

// The nearest-rank percentile of step durations: the ceil(q × n)-th smallest
// (q in (0, 1]), in seconds; 0 for no rows. Any thread.
StepTimeQuantiles ComputeStepTimeQuantiles(std::span<const StepBreakdownRow> rows);

// Fills a MetricsInput from the analyses and the stream: the window of the
// last kMetricsWindowSteps steps, the alert states, the rings' counters and
// the stream's late_events diagnostic. Pipeline thread (it reads Analyses);
// the Stream part is safe from any thread.
MetricsInput CollectMetrics(Analyses& analyses, const Stream& stream);

}  // namespace liveprof

#endif  // LIVEPROF_PIPELINE_METRICS_INPUT_H_
