// Metrics: the /metrics page, Prometheus' text exposition format (version
// 0.0.4), from a plain MetricsInput the pipeline fills from its analyses.
//
// Every family is named liveprof_*, has a HELP and a TYPE line, and uses base
// units (seconds, ratios 0..1); counters end in _total. Labels are low
// cardinality only: bucket category, input classification, source (one per
// producer ring name), alert rule and severity. Never an op or kernel name.
//
//   liveprof_build_info{version}                    gauge, always 1
//   liveprof_events_consumed_total                  counter
//   liveprof_events_published_total                 counter, every ring ever
//   liveprof_events_dropped_total                   counter, ring overflow + no ring
//   liveprof_source_events_published_total{source}  counter, live rings by name
//   liveprof_source_events_dropped_total{source}    counter, live rings by name
//   liveprof_late_events_total                      counter, past the reorder window
//   liveprof_steps_closed_total                     counter
//   liveprof_window_steps                           gauge, steps in the window
//   liveprof_step_time_seconds{percentile}          gauge, 50/90/99 over the window
//   liveprof_step_time_ratio{category}              gauge, breakdown bucket share
//   liveprof_input_ratio                            gauge, input share (§3.2)
//   liveprof_input_bound{classification}            gauge, 1 for the current one
//   liveprof_alert_firing{rule,severity}            gauge, 1 firing / 0 not
//
// The window is the last kMetricsWindowSteps steps. Its families are left out
// while it holds no step. The step-time percentiles are gauges with a
// `percentile` label, not a summary: a summary's _sum and _count must be
// cumulative over the whole run, and only the window's steps are at hand.
//
// Threads: RenderPrometheus is a pure function, any thread. CollectMetrics
// reads Analyses, so it runs where Analyses lives (the pipeline thread); the
// pipeline publishes its result (or the rendered text) for the web threads.
#ifndef LIVEPROF_WEB_METRICS_H_
#define LIVEPROF_WEB_METRICS_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aggregators/alerts.h"
#include "aggregators/analyses.h"
#include "aggregators/input_pipeline.h"
#include "aggregators/step_breakdown.h"
#include "stream/stream.h"

namespace liveprof {

// The step window the gauges describe: the last 20 steps, as the input-bound
// alert rules use.
inline constexpr uint32_t kMetricsWindowSteps = 20;

// The media type a /metrics response carries.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// One producer ring's counters (rings sharing a name are summed when rendered).
struct MetricsSource {
  std::string name;
  uint64_t published = 0;
  uint64_t dropped = 0;
};

// One alert rule's state.
struct MetricsAlert {
  std::string rule;
  AlertSeverity severity = AlertSeverity::kWarning;
  bool firing = false;  // firing or resolving (still firing, docs/alerts.md).
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
  StepTimeQuantiles step_time;                // of the window's step times.
  std::array<double, kBucketCount> bucket_ratio{};  // Σ bucket / Σ step time, 0..1.
  double input_ratio = 0;                     // Σ input / Σ step time, 0..1.
  InputBound input_bound = InputBound::kUnknown;
  uint64_t steps_closed = 0;
  uint64_t events_consumed = 0;
  uint64_t late_events = 0;
  uint64_t events_published = 0;  // the stream's totals, removed rings included.
  uint64_t events_dropped = 0;
  std::vector<MetricsSource> sources;
  std::vector<MetricsAlert> alerts;  // in rule order.
};

// The nearest-rank percentile of step durations: the ceil(q × n)-th smallest
// (q in (0, 1]), in seconds; 0 for no rows. Any thread.
StepTimeQuantiles ComputeStepTimeQuantiles(std::span<const StepBreakdownRow> rows);

// Fills a MetricsInput from the analyses and the stream: the window of the
// last kMetricsWindowSteps steps, the alert states, the rings' counters and
// the stream's late_events diagnostic. Pipeline thread (it reads Analyses);
// the Stream part is safe from any thread.
MetricsInput CollectMetrics(Analyses& analyses, const Stream& stream);

// The exposition text, families in the order of the table above, ending in a
// newline. Pure; any thread.
std::string RenderPrometheus(const MetricsInput& in);

// A label value escaped for the text format: backslash, double quote and
// newline become \\, \" and \n.
std::string EscapeLabelValue(std::string_view value);

// A sample value as Prometheus reads it: the shortest text that parses back
// to the same double; NaN, +Inf, -Inf for the special values.
std::string FormatSampleValue(double value);

}  // namespace liveprof

#endif  // LIVEPROF_WEB_METRICS_H_
