#include "pipeline/metrics_input.h"

#include <algorithm>

#include "stream/diagnostics.h"

#ifndef LIVEPROF_VERSION
#define LIVEPROF_VERSION "unknown"
#endif

namespace liveprof {
namespace {

double NsToSeconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

StepTimeQuantiles ComputeStepTimeQuantiles(std::span<const StepBreakdownRow> rows) {
  StepTimeQuantiles q;
  if (rows.empty()) return q;
  std::vector<uint64_t> ns;
  ns.reserve(rows.size());
  for (const StepBreakdownRow& r : rows) ns.push_back(r.step_ns());
  std::sort(ns.begin(), ns.end());
  // Nearest rank: the ceil(p × n)-th smallest, p in percent (integer maths,
  // so 50 % of 20 steps is exactly the 10th).
  auto at = [&](uint64_t percent) {
    const uint64_t n = ns.size();
    uint64_t rank = (percent * n + 99) / 100;
    rank = std::clamp<uint64_t>(rank, 1, n);
    return NsToSeconds(ns[rank - 1]);
  };
  q.p50 = at(50);
  q.p90 = at(90);
  q.p99 = at(99);
  return q;
}

MetricsInput CollectMetrics(Analyses& analyses, const Stream& stream) {
  MetricsInput in;
  in.version = LIVEPROF_VERSION;
  const StepBreakdownSnapshot steps = analyses.breakdown().Snapshot(WindowSel{.last_steps = kMetricsWindowSteps});
  in.window = steps.window;
  in.step_time = ComputeStepTimeQuantiles(steps.rows);
  if (in.window.step_ns_sum > 0) {
    const double sum = static_cast<double>(in.window.step_ns_sum);
    for (size_t b = 0; b < kBucketCount; ++b) {
      in.bucket_ratio[b] = static_cast<double>(in.window.bucket_ns[b]) / sum;
    }
    in.input_ratio = in.bucket_ratio[static_cast<size_t>(Bucket::kInput)];
    // As the input pipeline analyzer classifies the same window (docs/semantics-tf.md §3.3).
    in.input_bound = ClassifyInputBound(in.window.pct(Bucket::kInput), in.window.pct(Bucket::kAllOthers));
  }
  in.self_threads = analyses.self_cost().threads;
  in.self_rss_bytes = analyses.self_cost().rss_bytes;
  in.steps_closed = analyses.steps().steps_closed();
  in.events_consumed = analyses.events_consumed();
  in.late_events = stream.diagnostics().Get(Diag::late_events);
  in.events_published = stream.TotalPublished();
  in.events_dropped = stream.TotalDropped();
  for (const Stream::RingStats& r : stream.Stats()) {
    in.sources.push_back({r.name, r.published, r.dropped});
  }
  const AlertsSnapshot alerts = analyses.alerts().Snapshot();
  for (const AlertRuleStatus& s : alerts.rules) {
    in.alerts.push_back(
        {s.rule.name, s.rule.severity, s.state == AlertState::kFiring || s.state == AlertState::kResolving});
  }
  return in;
}

}  // namespace liveprof
