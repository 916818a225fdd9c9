// The alert engine: evaluates rules over the pipeline's windows with
// hysteresis, keeps their states and a bounded history, renders their texts
// and JSON. Rules files and the defaults are in alert_rules.cc.
#include "aggregators/alerts/alerts.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "aggregators/alerts/alert_metrics.h"
#include "base/json_writer.h"

namespace liveprof {

namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000;

// At most two decimals, trailing zeros dropped: 19.99, 20, 0.5, -3.25.
std::string FormatNumber(double v) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  std::string s(buf);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string FormatDuration(uint64_t ns) {
  if (ns >= kNsPerSecond) return FormatNumber(static_cast<double>(ns) / 1e9) + " s";
  if (ns >= 1'000'000) return FormatNumber(static_cast<double>(ns) / 1e6) + " ms";
  return FormatNumber(static_cast<double>(ns) / 1e3) + " us";
}

std::string StepCount(uint32_t n) { return std::to_string(n) + (n == 1 ? " step" : " steps"); }

bool Breaches(AlertComparison c, double value, double threshold) {
  switch (c) {
    case AlertComparison::kGreaterEqual: return value >= threshold;
    case AlertComparison::kGreater: return value > threshold;
    case AlertComparison::kLessEqual: return value <= threshold;
    case AlertComparison::kLess: return value < threshold;
  }
  return false;
}

bool UsesSteps(const AlertRule& rule) {
  return rule.window.kind == WindowSpec::Kind::kSteps ||
         (rule.baseline && rule.baseline->kind == WindowSpec::Kind::kSteps);
}

bool IsFiring(AlertState s) { return s == AlertState::kFiring || s == AlertState::kResolving; }

uint32_t SaturatingIncrement(uint32_t n) { return n == std::numeric_limits<uint32_t>::max() ? n : n + 1; }

// The rule's value at this evaluation: the metric, or for a baseline rule the
// recent window's excess over the baseline in percent. nullopt when missing,
// not finite, or (baseline) the baseline is not positive.
std::optional<MetricValue> Measure(const MetricSource& source, const AlertRule& rule) {
  std::optional<MetricValue> recent = source.Get(rule.metric, rule.window);
  if (!recent || !std::isfinite(recent->value)) return std::nullopt;
  if (!rule.baseline) return recent;
  const std::optional<MetricValue> base = source.Get(rule.metric, *rule.baseline);
  if (!base || !std::isfinite(base->value) || !(base->value > 0)) return std::nullopt;
  // A baseline noisier than the change the rule looks for is no baseline.
  if (base->spread_pct && !(*base->spread_pct <= std::abs(rule.threshold))) return std::nullopt;
  // 100 × (recent / base − 1), written so that exact inputs give exact
  // percentages: 120 vs 100 is 20, not 19.999999999999996.
  recent->value = (recent->value - base->value) * 100.0 / base->value;
  if (!std::isfinite(recent->value)) return std::nullopt;
  return recent;
}

AlertEvent MakeEvent(const AlertRule& rule, AlertEventState state, double value, int64_t first_step, int64_t last_step,
                     uint64_t now_ns, std::string_view worker) {
  AlertEvent e;
  e.rule = rule.name;
  e.metric = rule.metric;
  e.severity = rule.severity;
  e.state = state;
  e.value = value;
  e.threshold = rule.threshold;
  e.comparison = rule.comparison;
  e.window_text = AlertWindowText(rule.window, rule.baseline);
  e.window = rule.window;
  e.baseline = rule.baseline;
  e.first_step = first_step;
  e.last_step = last_step;
  e.ts_ns = now_ns;
  e.worker = worker;
  e.summary = state == AlertEventState::kFiring ? RenderAlertSummary(rule, value, worker)
                                                : RenderResolvedSummary(rule, value, worker);
  return e;
}

// {"steps":N} or {"seconds":T}, and a baseline's {"steps":N,"offset_steps":M}:
// the rules-file shapes.
void WriteWindow(JsonWriter& w, const WindowSpec& spec, bool baseline = false) {
  w.BeginObject();
  if (spec.kind == WindowSpec::Kind::kSteps) {
    w.KV("steps", spec.steps);
    if (baseline || spec.offset_steps != 0) w.KV("offset_steps", spec.offset_steps);
  } else {
    w.KV("seconds", static_cast<double>(spec.ns) / 1e9);
  }
  w.EndObject();
}

// The rule's own fields, as in a rules file (callers are inside an object).
void WriteRuleFields(JsonWriter& w, const AlertRule& rule) {
  w.KV("name", rule.name);
  w.KV("metric", rule.metric);
  w.KV("comparison", AlertComparisonText(rule.comparison));
  w.KV("threshold", rule.threshold);
  w.Key("window");
  WriteWindow(w, rule.window);
  if (rule.baseline) {
    w.Key("baseline");
    WriteWindow(w, *rule.baseline, /*baseline=*/true);
  }
  w.KV("fire_after", rule.fire_after);
  w.KV("resolve_after", rule.resolve_after);
  w.KV("severity", AlertSeverityName(rule.severity));
  w.KV("summary", rule.summary);
}

}  // namespace

void WriteAlertRuleFields(JsonWriter& w, const AlertRule& rule) { WriteRuleFields(w, rule); }

std::string_view AlertComparisonText(AlertComparison c) {
  switch (c) {
    case AlertComparison::kGreaterEqual: return ">=";
    case AlertComparison::kGreater: return ">";
    case AlertComparison::kLessEqual: return "<=";
    case AlertComparison::kLess: return "<";
  }
  return "?";
}

std::string_view AlertSeverityName(AlertSeverity s) {
  switch (s) {
    case AlertSeverity::kCritical: return "critical";
    case AlertSeverity::kWarning: return "warning";
    case AlertSeverity::kInfo: return "info";
  }
  return "?";
}

std::string_view AlertStateName(AlertState s) {
  switch (s) {
    case AlertState::kOk: return "ok";
    case AlertState::kPending: return "pending";
    case AlertState::kFiring: return "firing";
    case AlertState::kResolving: return "resolving";
    case AlertState::kClosed: return "closed";
  }
  return "?";
}

std::string_view AlertEventStateName(AlertEventState s) {
  switch (s) {
    case AlertEventState::kFiring: return "firing";
    case AlertEventState::kResolved: return "resolved";
    case AlertEventState::kClosed: return "closed";
  }
  return "?";
}

std::string AlertWindowText(const WindowSpec& window, const std::optional<WindowSpec>& baseline) {
  auto one = [](const WindowSpec& w, bool recent) -> std::string {
    if (w.kind == WindowSpec::Kind::kSeconds) {
      return (recent ? "last " : "the last ") + FormatDuration(w.ns);
    }
    if (w.offset_steps != 0) {
      return (recent ? "" : "the ") + StepCount(w.steps) + " ending " + std::to_string(w.offset_steps) + " steps back";
    }
    if (recent) return w.steps == 1 ? "last step" : "last " + StepCount(w.steps);
    return "the last " + StepCount(w.steps);
  };
  std::string text = one(window, true);
  if (baseline) {
    text += " vs ";
    if (window.kind == WindowSpec::Kind::kSteps && baseline->kind == WindowSpec::Kind::kSteps &&
        baseline->offset_steps == window.steps + window.offset_steps) {
      text += "the " + StepCount(baseline->steps) + " before";
    } else {
      text += one(*baseline, false);
    }
  }
  return text;
}

std::string_view AlertValueUnit(std::string_view metric, bool baseline) {
  if (baseline) return "%";
  const AlertMetricInfo* m = FindAlertMetric(metric);
  return m != nullptr ? m->unit : std::string_view();
}

namespace {

// A rule's value in its unit: "2.56%", "+23.4%" (a change), "61 s".
std::string WithUnit(const AlertRule& rule, double v) {
  const std::string_view unit = AlertValueUnit(rule.metric, rule.baseline.has_value());
  std::string t = (rule.baseline && v > 0 ? "+" : "") + FormatNumber(v);
  if (!unit.empty()) t += (unit == "%" ? "" : " ") + std::string(unit);
  return t;
}

}  // namespace

std::string RenderClosedSummary(const AlertRule& rule, double value, std::string_view why, std::string_view worker) {
  return rule.name + " closed " + std::string(why) + ": last " + rule.metric + (rule.baseline ? " change" : "") +
         (worker.empty() ? "" : " of " + std::string(worker)) + " " + WithUnit(rule, value) + " (" +
         std::string(AlertComparisonText(rule.comparison)) + " " + WithUnit(rule, rule.threshold) + " over the " +
         AlertWindowText(rule.window, rule.baseline) + ")";
}

std::string RenderResolvedSummary(const AlertRule& rule, double value, std::string_view worker) {
  auto with_unit = [&](double v) { return WithUnit(rule, v); };
  // The comparison that holds now: the rule's, negated.
  std::string_view back;
  switch (rule.comparison) {
    case AlertComparison::kGreaterEqual: back = "<"; break;
    case AlertComparison::kGreater: back = "<="; break;
    case AlertComparison::kLessEqual: back = ">"; break;
    case AlertComparison::kLess: back = ">="; break;
  }
  return rule.name + " resolved: " + rule.metric + (rule.baseline ? " change" : "") +
         (worker.empty() ? "" : " of " + std::string(worker)) + " " + with_unit(value) + " " + std::string(back) + " " +
         with_unit(rule.threshold) + " over the " + AlertWindowText(rule.window, rule.baseline);
}

std::string RenderAlertSummary(const AlertRule& rule, double value, std::string_view worker) {
  const std::string window = AlertWindowText(rule.window, rule.baseline);
  if (rule.summary.empty()) {
    return rule.name + ": " + rule.metric + (worker.empty() ? "" : " of " + std::string(worker)) +
           (rule.baseline ? " change " : " ") + FormatNumber(value) + (rule.baseline ? "% " : " ") +
           std::string(AlertComparisonText(rule.comparison)) + " " + FormatNumber(rule.threshold) + " over the " +
           window;
  }
  std::string out;
  const std::string_view t = rule.summary;
  out.reserve(t.size() + 32);
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '{') {
      const size_t j = t.find('}', i);
      if (j != std::string_view::npos) {
        const std::string_view name = t.substr(i + 1, j - i - 1);
        if (name == "value") {
          out += FormatNumber(value);
          i = j;
          continue;
        }
        if (name == "threshold") {
          out += FormatNumber(rule.threshold);
          i = j;
          continue;
        }
        if (name == "window") {
          out += window;
          i = j;
          continue;
        }
        if (name == "worker") {
          out += worker;
          i = j;
          continue;
        }
      }
    }
    out.push_back(t[i]);
  }
  return out;
}

// ---------------------------------------------------------------------------
// The engine.

AlertEngine::AlertEngine(std::vector<AlertRule> rules, AlertEngineOptions options) : options_(options) {
  rules_.reserve(rules.size());
  for (AlertRule& r : rules) {
    RuleState st;
    st.status.rule = std::move(r);
    rules_.push_back(std::move(st));
  }
}

void AlertEngine::Record(AlertEvent event, std::vector<AlertEvent>* out) {
  history_.push_back(event);
  while (history_.size() > options_.max_history) {
    history_.pop_front();
    ++history_dropped_;
  }
  out->push_back(std::move(event));
}

void AlertEngine::ResolveDropped(const RuleState& r, std::string_view why) {
  const AlertRuleStatus& s = r.status;
  const double value = s.value.value_or(std::numeric_limits<double>::quiet_NaN());
  AlertEvent e = MakeEvent(s.rule, AlertEventState::kResolved, value, s.first_step, s.last_step, last_now_ns_,
                           r.firing_event ? r.firing_event->worker : "");
  e.summary += " (";
  e.summary += why;
  e.summary += ")";
  Record(std::move(e), &queued_);
}

void AlertEngine::SetRules(std::vector<AlertRule> rules) {
  constexpr size_t kNone = static_cast<size_t>(-1);
  // Match each new rule to the first old rule of its name not yet matched.
  std::vector<size_t> match(rules.size(), kNone);
  std::vector<bool> taken(rules_.size(), false);
  std::vector<bool> kept(rules_.size(), false);
  for (size_t n = 0; n < rules.size(); ++n) {
    for (size_t o = 0; o < rules_.size(); ++o) {
      if (taken[o] || rules_[o].status.rule.name != rules[n].name) continue;
      taken[o] = true;
      const AlertRule& old = rules_[o].status.rule;
      if (old.metric == rules[n].metric && old.comparison == rules[n].comparison &&
          old.baseline.has_value() == rules[n].baseline.has_value()) {
        match[n] = o;
        kept[o] = true;
      }
      break;
    }
  }
  for (size_t o = 0; o < rules_.size(); ++o) {
    if (!kept[o] && IsFiring(rules_[o].status.state)) {
      ResolveDropped(rules_[o], taken[o] ? "rule changed" : "rule removed");
    }
  }
  std::vector<RuleState> next(rules.size());
  for (size_t n = 0; n < rules.size(); ++n) {
    if (match[n] != kNone) next[n] = std::move(rules_[match[n]]);
    next[n].status.rule = std::move(rules[n]);
  }
  rules_ = std::move(next);
}

std::vector<AlertEvent> AlertEngine::Evaluate(const MetricSource& source, uint64_t now_ns, int64_t current_step) {
  std::vector<AlertEvent> out;
  out.swap(queued_);
  ++evaluations_;
  last_now_ns_ = now_ns;
  last_step_ = current_step;
  for (RuleState& r : rules_) {
    AlertRuleStatus& s = r.status;
    const AlertRule& rule = s.rule;
    const bool per_step = UsesSteps(rule);
    const int64_t step = per_step ? source.StepClock(rule.metric).value_or(current_step) : current_step;
    if (per_step && r.evaluated_step == step) continue;  // no new step.
    const std::optional<MetricValue> m = Measure(source, rule);
    if (!m) {
      ++s.missing;
      continue;
    }
    if (per_step) r.evaluated_step = step;
    s.value = m->value;
    s.first_step = m->first_step;
    s.last_step = m->last_step;
    s.evaluated_ns = now_ns;
    ++s.evaluations;
    const bool breach = Breaches(rule.comparison, m->value, rule.threshold);
    const uint32_t fire_after = std::max<uint32_t>(1, rule.fire_after);
    const uint32_t resolve_after = std::max<uint32_t>(1, rule.resolve_after);
    auto enter = [&](AlertState state) {
      if (s.state != state) s.since_ns = now_ns;
      s.state = state;
    };
    if (breach) {
      s.breaching_count = SaturatingIncrement(s.breaching_count);
      s.clear_count = 0;
    } else {
      s.breaching_count = 0;
    }
    switch (s.state) {
      case AlertState::kOk:
      case AlertState::kClosed:  // (closed at the end of a job: this is another one)
      case AlertState::kPending:
        if (!breach) {
          enter(AlertState::kOk);
        } else if (s.breaching_count >= fire_after) {
          enter(AlertState::kFiring);
          AlertEvent e =
              MakeEvent(rule, AlertEventState::kFiring, m->value, m->first_step, m->last_step, now_ns, m->worker);
          r.firing_event = e;
          Record(std::move(e), &out);
        } else {
          enter(AlertState::kPending);
        }
        break;
      case AlertState::kFiring:
      case AlertState::kResolving:
        if (breach) {
          enter(AlertState::kFiring);
        } else {
          s.clear_count = SaturatingIncrement(s.clear_count);
          if (s.clear_count >= resolve_after) {
            s.clear_count = 0;
            enter(AlertState::kOk);
            // The resolved event names the worker its alert named.
            const std::string worker = r.firing_event ? r.firing_event->worker : m->worker;
            r.firing_event.reset();
            Record(MakeEvent(rule, AlertEventState::kResolved, m->value, m->first_step, m->last_step, now_ns, worker),
                   &out);
          } else {
            enter(AlertState::kResolving);
          }
        }
        break;
    }
  }
  return out;
}

std::vector<AlertEvent> AlertEngine::CloseAll(uint64_t now_ns, std::string_view why) {
  std::vector<AlertEvent> out;
  last_now_ns_ = std::max(last_now_ns_, now_ns);  // (the snapshot's clock: its events are not ahead of it)
  for (RuleState& r : rules_) {
    AlertRuleStatus& s = r.status;
    const bool firing = IsFiring(s.state);
    s.breaching_count = 0;
    s.clear_count = 0;
    if (!firing) {
      if (s.state == AlertState::kPending) {
        s.state = AlertState::kOk;
        s.since_ns = now_ns;
      }
      continue;
    }
    const double value = s.value.value_or(std::numeric_limits<double>::quiet_NaN());
    const std::string worker = r.firing_event ? r.firing_event->worker : "";
    AlertEvent e = MakeEvent(s.rule, AlertEventState::kClosed, value, s.first_step, s.last_step, now_ns, worker);
    e.summary = RenderClosedSummary(s.rule, value, why, worker);
    s.state = AlertState::kClosed;
    s.since_ns = now_ns;
    r.firing_event.reset();
    Record(std::move(e), &out);
  }
  return out;
}

AlertsSnapshot AlertEngine::Snapshot(size_t max_history) const {
  AlertsSnapshot snap;
  snap.rules.reserve(rules_.size());
  for (const RuleState& r : rules_) {
    snap.rules.push_back(r.status);
    if (r.firing_event && IsFiring(r.status.state)) {
      AlertEvent e = *r.firing_event;
      // What a banner shows now: the value of the last evaluation, not the
      // one of the moment it fired.
      if (r.status.value) {
        e.value_now = r.status.value;
        e.summary_now = RenderAlertSummary(r.status.rule, *r.status.value, e.worker);
      }
      snap.firing.push_back(std::move(e));
    }
  }
  const size_t skip = history_.size() > max_history ? history_.size() - max_history : 0;
  snap.history.assign(history_.begin() + static_cast<ptrdiff_t>(skip), history_.end());
  snap.history_dropped = history_dropped_ + skip;
  snap.evaluations = evaluations_;
  snap.last_evaluated_ns = last_now_ns_;
  snap.last_evaluated_step = last_step_;
  return snap;
}

// ---------------------------------------------------------------------------
// JSON and CSV.

void AlertEvent::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.KV("rule", rule);
  w.KV("metric", metric);
  w.KV("severity", AlertSeverityName(severity));
  w.KV("state", AlertEventStateName(state));
  w.KV("value", value);
  w.KV("threshold", threshold);
  w.KV("comparison", AlertComparisonText(comparison));
  w.KV("unit", AlertValueUnit(metric, baseline.has_value()));
  w.KV("window_text", window_text);
  w.Key("window");
  WriteWindow(w, window);
  if (baseline) {
    w.Key("baseline");
    WriteWindow(w, *baseline, /*baseline=*/true);
  }
  w.KV("first_step", first_step);
  w.KV("last_step", last_step);
  w.KV("ts_ns", ts_ns);
  if (!worker.empty()) w.KV("worker", worker);
  w.KV("summary", summary);
  if (value_now) {
    w.KV("value_now", *value_now);
    w.KV("summary_now", summary_now);
  }
  w.EndObject();
}

void AlertsSnapshot::WriteJson(JsonWriter& w) const {
  w.BeginObject();
  w.Key("rules");
  w.BeginArray();
  for (const AlertRuleStatus& r : rules) {
    w.BeginObject();
    WriteRuleFields(w, r.rule);
    w.KV("window_text", AlertWindowText(r.rule.window, r.rule.baseline));
    w.KV("unit", AlertValueUnit(r.rule.metric, r.rule.baseline.has_value()));
    w.KV("state", AlertStateName(r.state));
    w.KV("breaching_count", r.breaching_count);
    w.KV("clear_count", r.clear_count);
    w.Key("value");
    if (r.value) {
      w.Double(*r.value);
    } else {
      w.Null();
    }
    w.KV("first_step", r.first_step);
    w.KV("last_step", r.last_step);
    w.KV("evaluated_ns", r.evaluated_ns);
    w.KV("since_ns", r.since_ns);
    w.KV("evaluations", r.evaluations);
    w.KV("missing", r.missing);
    w.EndObject();
  }
  w.EndArray();
  w.Key("firing");
  w.BeginArray();
  for (const AlertEvent& e : firing) e.WriteJson(w);
  w.EndArray();
  w.Key("history");
  w.BeginArray();
  for (const AlertEvent& e : history) e.WriteJson(w);
  w.EndArray();
  w.KV("history_dropped", history_dropped);
  w.KV("evaluations", evaluations);
  w.KV("last_evaluated_ns", last_evaluated_ns);
  w.KV("last_evaluated_step", last_evaluated_step);
  w.EndObject();
}

std::string AlertsSnapshot::ToCsv() const {
  std::string out =
      "ts_ns,rule,metric,severity,state,value,comparison,threshold,window,first_step,last_step,"
      "summary\n";
  for (const AlertEvent& e : history) {
    out += std::to_string(e.ts_ns);
    out += ',';
    AppendCsvField(&out, e.rule);
    out += ',';
    AppendCsvField(&out, e.metric);
    out += ',';
    out += AlertSeverityName(e.severity);
    out += ',';
    out += AlertEventStateName(e.state);
    out += ',';
    AppendCsvNumber(&out, e.value);
    out += ',';
    out += AlertComparisonText(e.comparison);
    out += ',';
    AppendCsvNumber(&out, e.threshold);
    out += ',';
    AppendCsvField(&out, e.window_text);
    out += ',';
    out += std::to_string(e.first_step);
    out += ',';
    out += std::to_string(e.last_step);
    out += ',';
    AppendCsvField(&out, e.summary);
    out += '\n';
  }
  return out;
}

}  // namespace liveprof
