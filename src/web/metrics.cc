#include "web/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "stream/diagnostics.h"

#ifndef LIVEPROF_VERSION
#define LIVEPROF_VERSION "unknown"
#endif

namespace liveprof {
namespace {

constexpr std::string_view kVersion = LIVEPROF_VERSION;

// The input_bound state set's label values, every InputBound once.
constexpr std::pair<InputBound, std::string_view> kInputBoundLabels[] = {
    {InputBound::kHighly, "highly"},
    {InputBound::kModerately, "moderately"},
    {InputBound::kPotentially, "potentially"},
    {InputBound::kNot, "not"},
    {InputBound::kUnknown, "unknown"},
};

// HELP text escaping: backslash and newline (quotes stay as they are).
std::string EscapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

using Labels = std::initializer_list<std::pair<std::string_view, std::string_view>>;

// Appends the exposition text family by family.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}

  void Family(std::string_view name, std::string_view type, std::string_view help) {
    *out_ += "# HELP ";
    *out_ += name;
    *out_ += ' ';
    *out_ += EscapeHelp(help);
    *out_ += "\n# TYPE ";
    *out_ += name;
    *out_ += ' ';
    *out_ += type;
    *out_ += '\n';
  }

  // name{k1="v1",k2="v2"} value
  void Sample(std::string_view name, Labels labels, std::string_view value) {
    *out_ += name;
    if (labels.size() != 0) {
      *out_ += '{';
      bool first = true;
      for (const auto& [key, v] : labels) {
        if (!first) *out_ += ',';
        first = false;
        *out_ += key;
        *out_ += "=\"";
        *out_ += EscapeLabelValue(v);
        *out_ += '"';
      }
      *out_ += '}';
    }
    *out_ += ' ';
    *out_ += value;
    *out_ += '\n';
  }
  void Sample(std::string_view name, Labels labels, uint64_t value) {
    Sample(name, labels, std::string_view(std::to_string(value)));
  }
  void Sample(std::string_view name, Labels labels, double value) {
    Sample(name, labels, std::string_view(FormatSampleValue(value)));
  }

  // A family with one unlabelled sample.
  void Counter(std::string_view name, std::string_view help, uint64_t value) {
    Family(name, "counter", help);
    Sample(name, {}, value);
  }
  void Gauge(std::string_view name, std::string_view help, double value) {
    Family(name, "gauge", help);
    Sample(name, {}, value);
  }

 private:
  std::string* out_;
};

// Sources by name, rings sharing a name summed: one series per label value.
std::vector<MetricsSource> MergeSources(std::vector<MetricsSource> sources) {
  std::stable_sort(sources.begin(), sources.end(),
                   [](const MetricsSource& a, const MetricsSource& b) { return a.name < b.name; });
  std::vector<MetricsSource> out;
  for (MetricsSource& s : sources) {
    if (!out.empty() && out.back().name == s.name) {
      out.back().published += s.published;
      out.back().dropped += s.dropped;
    } else {
      out.push_back(std::move(s));
    }
  }
  return out;
}

double NsToSeconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, r.ptr);
}

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
  in.version = std::string(kVersion);
  const StepBreakdownSnapshot steps =
      analyses.breakdown().Snapshot(WindowSel{.last_steps = kMetricsWindowSteps});
  in.window = steps.window;
  in.step_time = ComputeStepTimeQuantiles(steps.rows);
  if (in.window.step_ns_sum > 0) {
    const double sum = static_cast<double>(in.window.step_ns_sum);
    for (size_t b = 0; b < kBucketCount; ++b) {
      in.bucket_ratio[b] = static_cast<double>(in.window.bucket_ns[b]) / sum;
    }
    in.input_ratio = in.bucket_ratio[static_cast<size_t>(Bucket::kInput)];
    // As the input pipeline analyzer classifies the same window (§3.3).
    in.input_bound =
        ClassifyInputBound(in.window.pct(Bucket::kInput), in.window.pct(Bucket::kAllOthers));
  }
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
    in.alerts.push_back({s.rule.name, s.rule.severity,
                         s.state == AlertState::kFiring || s.state == AlertState::kResolving});
  }
  return in;
}

std::string RenderPrometheus(const MetricsInput& in) {
  std::string out;
  out.reserve(4096 + 160 * (in.sources.size() + in.alerts.size()));
  Writer w(&out);

  w.Family("liveprof_build_info", "gauge", "liveprof's version; always 1.");
  w.Sample("liveprof_build_info", {{"version", in.version}}, uint64_t{1});

  w.Counter("liveprof_events_consumed_total", "Events the analyses consumed.", in.events_consumed);
  w.Counter("liveprof_events_published_total",
            "Events the producers wrote into their rings, every ring since the start.",
            in.events_published);
  w.Counter("liveprof_events_dropped_total",
            "Events lost before analysis: full rings, records the source dropped, threads with "
            "no ring.",
            in.events_dropped);

  const std::vector<MetricsSource> sources = MergeSources(in.sources);
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

  w.Counter("liveprof_late_events_total",
            "Events that arrived after the reorder window had passed their time.", in.late_events);
  w.Counter("liveprof_steps_closed_total", "Training steps completed.", in.steps_closed);

  if (in.window.steps > 0) {
    w.Gauge("liveprof_window_steps",
            "Steps in the window the step gauges describe (the last 20 steps).",
            static_cast<double>(in.window.steps));
    w.Family("liveprof_step_time_seconds", "gauge",
             "Step time at a percentile (nearest rank) over the last 20 steps.");
    w.Sample("liveprof_step_time_seconds", {{"percentile", "50"}}, in.step_time.p50);
    w.Sample("liveprof_step_time_seconds", {{"percentile", "90"}}, in.step_time.p90);
    w.Sample("liveprof_step_time_seconds", {{"percentile", "99"}}, in.step_time.p99);
    w.Family("liveprof_step_time_ratio", "gauge",
             "Share of the step time in each step-time breakdown category over the last 20 "
             "steps (ratio of sums).");
    for (size_t b = 0; b < kBucketCount; ++b) {
      w.Sample("liveprof_step_time_ratio", {{"category", BucketKey(static_cast<Bucket>(b))}},
               in.bucket_ratio[b]);
    }
    w.Gauge("liveprof_input_ratio",
            "Share of the step time spent waiting for input over the last 20 steps (ratio of "
            "sums); 0.20 and up is HIGHLY, 0.05 and up MODERATELY input-bound.",
            in.input_ratio);
  }
  w.Family("liveprof_input_bound", "gauge",
           "The input pipeline classification of the last 20 steps: 1 for the current one.");
  for (const auto& [bound, label] : kInputBoundLabels) {
    w.Sample("liveprof_input_bound", {{"classification", label}},
             uint64_t{in.input_bound == bound ? 1u : 0u});
  }

  if (!in.alerts.empty()) {
    w.Family("liveprof_alert_firing", "gauge",
             "liveprof's own alert rules: 1 while the rule is firing, else 0.");
    for (const MetricsAlert& a : in.alerts) {
      w.Sample("liveprof_alert_firing",
               {{"rule", a.rule}, {"severity", AlertSeverityName(a.severity)}},
               uint64_t{a.firing ? 1u : 0u});
    }
  }
  return out;
}

}  // namespace liveprof
