#include "web/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "stream/diagnostics.h"

namespace liveprof {
namespace {

// Threads' CPU since they started, in seconds, by name (threads sharing a
// name are summed), sorted by name.
std::vector<std::pair<std::string, double>> CpuSecondsByName(const std::vector<ThreadCpu>& threads) {
  std::vector<std::pair<std::string, double>> by_name;
  for (const ThreadCpu& t : threads) {
    auto it = std::find_if(by_name.begin(), by_name.end(), [&](const auto& p) { return p.first == t.name; });
    if (it == by_name.end()) {
      by_name.emplace_back(t.name, 0.0);
      it = by_name.end() - 1;
    }
    it->second += static_cast<double>(t.cpu_ns) / 1e9;
  }
  std::sort(by_name.begin(), by_name.end());
  return by_name;
}

// The input_bound state set's label values, every InputBound once.
constexpr std::pair<InputBound, std::string_view> kInputBoundLabels[] = {
    {InputBound::kHighly, "highly"}, {InputBound::kModerately, "moderately"}, {InputBound::kPotentially, "potentially"},
    {InputBound::kNot, "not"},       {InputBound::kUnknown, "unknown"},
};

using Writer = PrometheusText;

}  // namespace

std::string RenderPrometheus(const MetricsInput& in) {
  std::string out;
  out.reserve(4096 + 160 * (in.sources.size() + in.alerts.size()));
  Writer w(&out);

  w.Family("liveprof_build_info", "gauge", "liveprof's version; always 1.");
  w.Sample("liveprof_build_info", {{"version", in.version}}, uint64_t{1});

  w.Counter("liveprof_events_consumed_total", "Events the analyses consumed.", in.events_consumed);
  w.Counter("liveprof_events_published_total",
            "Events the producers wrote into their rings, every ring since the start.", in.events_published);
  w.Counter("liveprof_events_dropped_total",
            "Events lost before analysis: full rings, records the source dropped, threads with "
            "no ring.",
            in.events_dropped);
  w.Family("liveprof_pipeline_backlog_events", "gauge",
           "Events drained from the rings and queued for the analyses: a growing backlog is a "
           "pipeline slower than its producers (at 2 Mi the rings drop).");
  w.Sample("liveprof_pipeline_backlog_events", {}, in.pipeline_backlog_events);

  const std::vector<MetricsSource> sources = MergeSourcesByName(in.sources);
  if (!sources.empty()) {
    w.Family("liveprof_source_events_published_total", "counter",
             "Events written per producer ring (live rings, by ring name).");
    for (const MetricsSource& s : sources) {
      w.Sample("liveprof_source_events_published_total", {{"source", s.name}}, s.published);
    }
    w.Family("liveprof_source_events_dropped_total", "counter",
             "Events dropped per producer ring (live rings, by ring name).");
    for (const MetricsSource& s : sources) {
      w.Sample("liveprof_source_events_dropped_total", {{"source", s.name}}, s.dropped);
    }
  }

  if (!in.ingest_refused.empty()) {
    w.Family("liveprof_ingest_refused_events_total", "counter",
             "Events an ingest source sent that the server refused alone (the rest of their batch was "
             "taken), by source ring and reason.");
    for (const MetricsRefusal& r : in.ingest_refused) {
      w.Sample("liveprof_ingest_refused_events_total", {{"source", r.source}, {"reason", r.reason}}, r.events);
    }
  }

  // liveprof's own cost, read from the process (/proc/self): each of its
  // threads' CPU, and the server's memory.
  if (!in.self_threads.empty()) {
    w.Family("liveprof_self_cpu_seconds_total", "counter",
             "CPU time (user + system) of each liveprof thread of the server, since it started, by thread "
             "name (threads sharing a name are summed).");
    for (const auto& [name, seconds] : CpuSecondsByName(in.self_threads)) {
      w.Sample("liveprof_self_cpu_seconds_total", {{"thread", name}}, seconds);
    }
    w.Family("liveprof_self_resident_bytes", "gauge", "The server process's resident memory (RSS).");
    w.Sample("liveprof_self_resident_bytes", {}, in.self_rss_bytes);
  }
  // And in each connected ingest source's process, as its sender read it.
  if (!in.ingest_cost.empty()) {
    w.Family("liveprof_source_self_cpu_seconds_total", "counter",
             "CPU time (user + system) of each liveprof thread of an ingest source's process (its sender, "
             "its CUPTI buffer thread), since it started, by source ring and thread name.");
    for (const MetricsSourceCost& c : in.ingest_cost) {
      for (const auto& [name, seconds] : CpuSecondsByName(c.threads)) {
        w.Sample("liveprof_source_self_cpu_seconds_total", {{"source", c.source}, {"thread", name}}, seconds);
      }
    }
    w.Family("liveprof_source_resident_bytes", "gauge",
             "An ingest source's process's resident memory (RSS: the job's own, liveprof's included).");
    for (const MetricsSourceCost& c : in.ingest_cost) {
      w.Sample("liveprof_source_resident_bytes", {{"source", c.source}}, c.rss_bytes);
    }
    w.Family("liveprof_source_hook_seconds_total", "counter",
             "Time liveprof's hooks in an ingest source's program (the Python package's, under liveprof run) "
             "measured themselves spending on the program's threads, since the process started; 0: none.");
    for (const MetricsSourceCost& c : in.ingest_cost) {
      w.Sample("liveprof_source_hook_seconds_total", {{"source", c.source}}, static_cast<double>(c.hook_ns) / 1e9);
    }
    w.Family("liveprof_source_cupti_overhead_seconds_total", "counter",
             "CUPTI's own time in an ingest source's process (its OVERHEAD records of its own work: buffer "
             "flushes and requests, instrumentation, resources), since the process started; 0: none recorded.");
    for (const MetricsSourceCost& c : in.ingest_cost) {
      w.Sample("liveprof_source_cupti_overhead_seconds_total", {{"source", c.source}},
               static_cast<double>(c.cupti_overhead_ns) / 1e9);
    }
  }

  w.Counter("liveprof_late_events_total", "Events that arrived after the reorder window had passed their time.",
            in.late_events);
  w.Counter("liveprof_steps_closed_total", "Training steps completed.", in.steps_closed);

  if (in.window.steps > 0) {
    w.Gauge("liveprof_window_steps", "Steps in the window the step gauges describe (the last 20 steps).",
            static_cast<double>(in.window.steps));
    w.Family("liveprof_step_time_seconds", "gauge", "Step time at a percentile (nearest rank) over the last 20 steps.");
    w.Sample("liveprof_step_time_seconds", {{"percentile", "50"}}, in.step_time.p50);
    w.Sample("liveprof_step_time_seconds", {{"percentile", "90"}}, in.step_time.p90);
    w.Sample("liveprof_step_time_seconds", {{"percentile", "99"}}, in.step_time.p99);
    w.Family("liveprof_step_time_ratio", "gauge",
             "Share of the step time in each step-time breakdown category over the last 20 "
             "steps (ratio of sums).");
    for (size_t b = 0; b < kBucketCount; ++b) {
      w.Sample("liveprof_step_time_ratio", {{"category", BucketKey(static_cast<Bucket>(b))}}, in.bucket_ratio[b]);
    }
    w.Gauge("liveprof_input_ratio",
            "Share of the step time spent waiting for input over the last 20 steps (ratio of "
            "sums); 0.20 and up is HIGHLY, 0.05 and up MODERATELY input-bound.",
            in.input_ratio);
  }
  w.Family("liveprof_input_bound", "gauge",
           "The input pipeline classification of the last 20 steps: 1 for the current one.");
  for (const auto& [bound, label] : kInputBoundLabels) {
    w.Sample("liveprof_input_bound", {{"classification", label}}, uint64_t{in.input_bound == bound ? 1u : 0u});
  }

  if (!in.alerts.empty()) {
    w.Family("liveprof_alert_firing", "gauge", "liveprof's own alert rules: 1 while the rule is firing, else 0.");
    for (const MetricsAlert& a : in.alerts) {
      w.Sample("liveprof_alert_firing", {{"rule", a.rule}, {"severity", AlertSeverityName(a.severity)}},
               uint64_t{a.firing ? 1u : 0u});
    }
  }
  return out;
}

}  // namespace liveprof
