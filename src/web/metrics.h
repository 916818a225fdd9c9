// Metrics: the /metrics page, Prometheus' text exposition format (version
// 0.0.4), from a plain MetricsInput the pipeline fills from its analyses.
//
// Every family is named liveprof_*, has a HELP and a TYPE line, and uses base
// units (seconds, ratios 0..1); counters end in _total. Labels are low
// cardinality only: bucket category, input classification, source (one per
// producer ring name), refusal reason, alert rule and severity, liveprof thread name. Never an op
// or kernel name.
//
//   liveprof_build_info{version}                    gauge, always 1
//   liveprof_events_consumed_total                  counter
//   liveprof_events_published_total                 counter, every ring ever
//   liveprof_events_dropped_total                   counter, ring overflow + no ring
//   liveprof_pipeline_backlog_events                gauge, drained, not yet analysed
//   liveprof_source_events_published_total{source}  counter, live rings by name
//   liveprof_source_events_dropped_total{source}    counter, live rings by name
//   liveprof_ingest_refused_events_total{source,reason}
//                                                   counter, events an ingest source
//                                                   sent that were refused (by ring
//                                                   name; docs/ingest.md), when any
//   liveprof_self_cpu_seconds_total{thread}         counter, the server's liveprof threads (/proc)
//   liveprof_self_resident_bytes                    gauge, the server's RSS
//   liveprof_source_self_cpu_seconds_total{source,thread}
//                                                   counter, an ingest source's liveprof
//                                                   threads, as its sender read them
//   liveprof_source_resident_bytes{source}          gauge, an ingest source's process's RSS
//   liveprof_source_hook_seconds_total{source}      counter, the time liveprof's hooks in an
//                                                   ingest source's program measured
//   liveprof_late_events_total                      counter, past the reorder window
//   liveprof_steps_closed_total                     counter
//   liveprof_window_steps                           gauge, steps in the window
//   liveprof_step_time_seconds{percentile}          gauge, 50/90/99 over the window
//   liveprof_step_time_ratio{category}              gauge, breakdown bucket share
//   liveprof_input_ratio                            gauge, input share (docs/semantics-tf.md §3.2)
//   liveprof_input_bound{classification}            gauge, 1 for the current one
//   liveprof_alert_firing{rule,severity}            gauge, 1 firing / 0 not
//
// The window is the last kMetricsWindowSteps steps. Its families are left out
// while it holds no step. The step-time percentiles are gauges with a
// `percentile` label, not a summary: a summary's _sum and _count must be
// cumulative over the whole run, and only the window's steps are at hand.
//
// Threads: pure functions, any thread. The MetricsInput comes from
// CollectMetrics (pipeline/metrics_input.h) on the pipeline thread, which
// publishes it with each snapshot.
#ifndef LIVEPROF_WEB_METRICS_H_
#define LIVEPROF_WEB_METRICS_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/prometheus_text.h"  // kPrometheusContentType, EscapeLabelValue, FormatSampleValue
#include "pipeline/metrics_input.h"

namespace liveprof {

// The exposition text, families in the order of the table above, ending in a
// newline. Pure; any thread.
std::string RenderPrometheus(const MetricsInput& in);

}  // namespace liveprof

#endif  // LIVEPROF_WEB_METRICS_H_
