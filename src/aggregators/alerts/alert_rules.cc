// The alert rules file: parsing with errors that name what and where, the
// writer that reads back equal, and the built-in defaults (the same rules as
// deploy/alerts/default_rules.json). The engine that evaluates rules is in
// alerts.cc; the format is in docs/alerts.md.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "aggregators/alerts/alert_metrics.h"
#include "aggregators/alerts/alerts.h"
#include "base/json_writer.h"

namespace liveprof {

namespace {

// The metrics' names, as alert_metrics.h's table lists them.
std::string KnownMetrics() {
  std::string s;
  for (const AlertMetricInfo& m : kAlertMetrics) {
    if (!s.empty()) s += ", ";
    s += m.name;
  }
  return s;
}

constexpr size_t kMaxNameBytes = 128;
constexpr size_t kMaxSummaryBytes = 1024;
constexpr double kMaxWindowSeconds = 1e9;  // 31 years: ns still fit in uint64.
constexpr uint64_t kNsPerSecond = 1'000'000'000;
constexpr std::array<std::string_view, 4> kPlaceholders = {"value", "threshold", "window", "worker"};

// ---------------------------------------------------------------------------
// Parsing.

using Json = nlohmann::json;

// A first SAX pass: the byte offset of a syntax error, and the first key that
// appears twice in one object (the DOM would silently keep the last one).
class SyntaxCheck : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override {
    Value();
    frames_.push_back(Frame{true, 0, "", {}});
    return true;
  }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    if (duplicates_.size() < kMaxDuplicates && std::find(f.keys.begin(), f.keys.end(), k) != f.keys.end()) {
      Duplicate d;
      for (size_t i = 0; i + 1 < frames_.size(); ++i) {
        if (frames_[i].is_object) {
          d.path.emplace_back(frames_[i].key);
        } else {
          d.path.emplace_back(frames_[i].count - 1);
        }
      }
      d.key = k;
      duplicates_.push_back(std::move(d));
    }
    f.keys.push_back(k);
    f.key = k;
    return true;
  }
  bool end_object() override {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    Value();
    frames_.push_back(Frame{false, 0, "", {}});
    return true;
  }
  bool end_array() override {
    frames_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    error_position_ = position;
    error_message_ = ex.what();
    return false;
  }

  size_t error_position() const { return error_position_; }
  const std::string& error_message() const { return error_message_; }
  struct Duplicate {
    // Object keys (string) and array indices (size_t) down to the object that
    // holds the key twice.
    std::vector<std::variant<std::string, size_t>> path;
    std::string key;
  };
  // In document order; the first kMaxDuplicates.
  const std::vector<Duplicate>& duplicates() const { return duplicates_; }

 private:
  struct Frame {
    bool is_object;
    size_t count;     // arrays: elements begun so far.
    std::string key;  // objects: the current key.
    std::vector<std::string> keys;
  };
  bool Value() {
    if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().count;
    return true;
  }

  std::vector<Frame> frames_;
  size_t error_position_ = 0;
  std::string error_message_;
  static constexpr size_t kMaxDuplicates = 20;
  std::vector<Duplicate> duplicates_;
};

std::string Join(std::span<const std::string_view> items, std::string_view sep) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += sep;
    s += items[i];
  }
  return s;
}

constexpr std::array<std::string_view, 10> kRuleFields = {
    "name",     "metric",     "comparison",    "threshold", "window",
    "baseline", "fire_after", "resolve_after", "severity",  "summary",
};

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A whole number in [lo, hi].
bool GetWhole(const Json& v, uint64_t lo, uint64_t hi, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  const uint64_t n = v.get<uint64_t>();
  if (n < lo || n > hi) return false;
  *out = n;
  return true;
}

// The first "{name}" in `text` whose name is not a placeholder, or "".
std::string UnknownPlaceholder(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{') continue;
    size_t j = i + 1;
    while (j < text.size() && ((text[j] >= 'a' && text[j] <= 'z') || text[j] == '_' ||
                               (text[j] >= 'A' && text[j] <= 'Z') || (text[j] >= '0' && text[j] <= '9'))) {
      ++j;
    }
    if (j == i + 1 || j >= text.size() || text[j] != '}') continue;
    const std::string_view name = text.substr(i + 1, j - i - 1);
    if (std::find(kPlaceholders.begin(), kPlaceholders.end(), name) == kPlaceholders.end()) {
      return std::string(text.substr(i, j - i + 1));
    }
  }
  return "";
}

class RuleParser {
 public:
  RuleParser(size_t index, const Json& j, std::vector<std::string>* errors) : j_(j), errors_(errors) {
    prefix_ = "rules[" + std::to_string(index) + "]";
    if (j.is_object()) {
      const auto it = j.find("name");
      if (it != j.end() && it->is_string()) {
        std::string name = it->get<std::string>();
        if (name.size() > 64) name = name.substr(0, 64) + "...";
        prefix_ += " '" + name + "'";
      }
    }
  }

  const std::string& prefix() const { return prefix_; }

  bool Parse(AlertRule* rule) {
    if (!j_.is_object()) {
      Error("must be an object");
      return false;
    }
    for (const auto& item : j_.items()) {
      if (std::find(kRuleFields.begin(), kRuleFields.end(), item.key()) == kRuleFields.end()) {
        Error("unknown field '" + item.key() + "' (known fields: " + Join(kRuleFields, ", ") + ")");
      }
    }
    if (const Json* v = Required("name")) {
      if (!v->is_string() || !ValidName(v->get<std::string>())) {
        Error("'name' must be a string of 1 to 128 characters from A-Z a-z 0-9 _ . : -");
      } else {
        rule->name = v->get<std::string>();
      }
    }
    if (const Json* v = Required("metric")) {
      if (!v->is_string()) {
        Error("'metric' must be a string");
      } else {
        const std::string m = v->get<std::string>();
        if (FindAlertMetric(m) == nullptr) {
          Error("unknown metric '" + m + "' (known metrics: " + KnownMetrics() + ")");
        } else {
          rule->metric = m;
        }
      }
    }
    if (const Json* v = Required("comparison")) {
      bool ok = false;
      if (v->is_string()) {
        for (const auto c : {AlertComparison::kGreaterEqual, AlertComparison::kGreater, AlertComparison::kLessEqual,
                             AlertComparison::kLess}) {
          if (v->get<std::string>() == AlertComparisonText(c)) {
            rule->comparison = c;
            ok = true;
          }
        }
      }
      if (!ok) Error("'comparison' must be one of \">=\", \">\", \"<=\", \"<\"");
    }
    if (const Json* v = Required("threshold")) {
      if (!v->is_number() || !std::isfinite(v->get<double>())) {
        Error("'threshold' must be a number");
      } else {
        rule->threshold = v->get<double>();
      }
    }
    if (const Json* v = Required("window")) ParseWindow(*v, &rule->window);
    if (const Json* v = Optional("baseline")) {
      rule->baseline.emplace();
      ParseBaseline(*v, &*rule->baseline);
    }
    uint64_t n = 0;
    if (const Json* v = Optional("fire_after")) {
      if (!GetWhole(*v, 1, UINT32_MAX, &n)) {
        Error("'fire_after' must be a whole number from 1 to 4294967295");
      } else {
        rule->fire_after = static_cast<uint32_t>(n);
      }
    }
    if (const Json* v = Optional("resolve_after")) {
      if (!GetWhole(*v, 1, UINT32_MAX, &n)) {
        Error("'resolve_after' must be a whole number from 1 to 4294967295");
      } else {
        rule->resolve_after = static_cast<uint32_t>(n);
      }
    }
    if (const Json* v = Required("severity")) {
      bool ok = false;
      if (v->is_string()) {
        for (const auto s : {AlertSeverity::kCritical, AlertSeverity::kWarning, AlertSeverity::kInfo}) {
          if (v->get<std::string>() == AlertSeverityName(s)) {
            rule->severity = s;
            ok = true;
          }
        }
      }
      if (!ok) Error("'severity' must be one of \"critical\", \"warning\", \"info\"");
    }
    if (const Json* v = Optional("summary")) {
      if (!v->is_string() || v->get<std::string>().size() > kMaxSummaryBytes) {
        Error("'summary' must be a string of at most 1024 bytes");
      } else {
        rule->summary = v->get<std::string>();
        const std::string unknown = UnknownPlaceholder(rule->summary);
        if (!unknown.empty()) {
          Error("'summary' has an unknown placeholder '" + unknown +
                "' (known: {value}, {threshold}, {window}, {worker})");
        }
      }
    }
    return ok_;
  }

 private:
  void Error(const std::string& what) {
    errors_->push_back(prefix_ + ": " + what);
    ok_ = false;
  }
  const Json* Optional(const char* field) const {
    const auto it = j_.find(field);
    return it == j_.end() ? nullptr : &*it;
  }
  const Json* Required(const char* field) {
    const Json* v = Optional(field);
    if (!v) Error(std::string("'") + field + "' is missing");
    return v;
  }

  void ParseWindow(const Json& v, WindowSpec* out) {
    constexpr std::array<std::string_view, 2> kFields = {"steps", "seconds"};
    if (!v.is_object()) {
      Error("'window' must be an object: {\"steps\": N} or {\"seconds\": T}");
      return;
    }
    for (const auto& item : v.items()) {
      if (std::find(kFields.begin(), kFields.end(), item.key()) == kFields.end()) {
        Error("unknown field 'window." + item.key() + "' (known fields: steps, seconds)");
      }
    }
    const auto steps = v.find("steps");
    const auto seconds = v.find("seconds");
    if ((steps == v.end()) == (seconds == v.end())) {
      Error("'window' must have exactly one of 'steps' or 'seconds'");
      return;
    }
    if (steps != v.end()) {
      uint64_t n = 0;
      if (!GetWhole(*steps, 1, UINT32_MAX, &n)) {
        Error("'window.steps' must be a whole number from 1 to 4294967295");
        return;
      }
      *out = WindowSpec::Steps(static_cast<uint32_t>(n));
      return;
    }
    const double s = seconds->is_number() ? seconds->get<double>() : -1;
    const double ns = std::round(s * 1e9);
    if (!(ns >= 1) || !(s <= kMaxWindowSeconds)) {
      Error("'window.seconds' must be a number of seconds above 0 and at most 1e9");
      return;
    }
    *out = WindowSpec::Duration(static_cast<uint64_t>(ns));
  }

  void ParseBaseline(const Json& v, WindowSpec* out) {
    constexpr std::array<std::string_view, 2> kFields = {"steps", "offset_steps"};
    if (!v.is_object()) {
      Error("'baseline' must be an object: {\"steps\": N, \"offset_steps\": M}");
      return;
    }
    for (const auto& item : v.items()) {
      if (std::find(kFields.begin(), kFields.end(), item.key()) == kFields.end()) {
        Error("unknown field 'baseline." + item.key() + "' (known fields: steps, offset_steps)");
      }
    }
    uint64_t steps = 0;
    uint64_t offset = 0;
    const auto s = v.find("steps");
    const auto o = v.find("offset_steps");
    if (s == v.end()) {
      Error("'baseline.steps' is missing");
    } else if (!GetWhole(*s, 1, UINT32_MAX, &steps)) {
      Error("'baseline.steps' must be a whole number from 1 to 4294967295");
    }
    if (o == v.end()) {
      Error("'baseline.offset_steps' is missing");
    } else if (!GetWhole(*o, 0, UINT32_MAX, &offset)) {
      Error("'baseline.offset_steps' must be a whole number from 0 to 4294967295");
    }
    *out = WindowSpec::Steps(static_cast<uint32_t>(steps), static_cast<uint32_t>(offset));
  }

  const Json& j_;
  std::vector<std::string>* errors_;
  std::string prefix_;
  bool ok_ = true;
};

AlertRule MakeRule(std::string name, std::string metric, AlertComparison cmp, double threshold, WindowSpec window,
                   uint32_t fire_after, uint32_t resolve_after, AlertSeverity severity, std::string summary) {
  AlertRule r;
  r.name = std::move(name);
  r.metric = std::move(metric);
  r.comparison = cmp;
  r.threshold = threshold;
  r.window = window;
  r.fire_after = fire_after;
  r.resolve_after = resolve_after;
  r.severity = severity;
  r.summary = std::move(summary);
  return r;
}

}  // namespace

std::string AlertRulesToJson(std::span<const AlertRule> rules) {
  JsonWriter w;
  w.BeginObject();
  w.KV("version", 1);
  w.Key("rules");
  w.BeginArray();
  for (const AlertRule& r : rules) {
    w.BeginObject();
    WriteAlertRuleFields(w, r);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

bool ParseAlertRules(std::string_view json, std::vector<AlertRule>* out, std::string* error) {
  std::vector<std::string> errors;
  auto fail = [&] {
    if (error) {
      error->clear();
      for (size_t i = 0; i < errors.size(); ++i) {
        if (i) error->push_back('\n');
        *error += errors[i];
      }
    }
    return false;
  };
  if (out == nullptr) {
    errors.push_back("no output vector given");
    return fail();
  }

  SyntaxCheck check;
  if (!Json::sax_parse(json.begin(), json.end(), &check)) {
    // nlohmann counts the offending byte as read: its position is 1-based.
    const size_t offset = std::min(json.size(), check.error_position() > 0 ? check.error_position() - 1 : size_t{0});
    size_t line = 1;
    size_t column = 1;
    for (size_t i = 0; i < offset; ++i) {
      if (json[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string detail = check.error_message();
    const size_t col = detail.find("column ");
    const size_t colon = col == std::string::npos ? col : detail.find(": ", col);
    if (colon != std::string::npos) detail = detail.substr(colon + 2);
    errors.push_back("invalid JSON at byte " + std::to_string(offset) + " (line " + std::to_string(line) + ", column " +
                     std::to_string(column) + "): " + detail);
    return fail();
  }
  const Json doc = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    errors.push_back("invalid JSON");
    return fail();
  }

  for (const SyntaxCheck::Duplicate& dup : check.duplicates()) {
    const auto& path = dup.path;
    std::string where;
    std::string key = dup.key;
    if (path.size() >= 2 && std::holds_alternative<std::string>(path[0]) && std::get<std::string>(path[0]) == "rules" &&
        std::holds_alternative<size_t>(path[1])) {
      // The DOM keeps the last of two "rules" keys: it may not hold this index.
      const size_t index = std::get<size_t>(path[1]);
      const auto rules = doc.find("rules");
      if (rules != doc.end() && rules->is_array() && index < rules->size()) {
        std::vector<std::string> ignored;
        where = RuleParser(index, (*rules)[index], &ignored).prefix();
      } else {
        where = "rules[" + std::to_string(index) + "]";
      }
      std::string inner;
      for (size_t i = 2; i < path.size(); ++i) {
        if (const auto* s = std::get_if<std::string>(&path[i])) {
          inner += *s + ".";
        } else {
          inner += "[" + std::to_string(std::get<size_t>(path[i])) + "].";
        }
      }
      key = inner + key;
    } else {
      for (const auto& p : path) {
        if (const auto* s = std::get_if<std::string>(&p)) {
          where += (where.empty() ? "" : ".") + *s;
        } else {
          where += "[" + std::to_string(std::get<size_t>(p)) + "]";
        }
      }
      if (where.empty()) where = "top level";
    }
    errors.push_back(where + ": duplicate key '" + key + "'");
  }

  if (!doc.is_object()) {
    errors.push_back("the top level must be an object: {\"version\": 1, \"rules\": [...]}");
    return fail();
  }
  for (const auto& item : doc.items()) {
    if (item.key() != "version" && item.key() != "rules") {
      errors.push_back("unknown top-level field '" + item.key() + "' (known fields: version, rules)");
    }
  }
  const auto version = doc.find("version");
  if (version == doc.end()) {
    errors.push_back("'version' is missing (this build reads version 1)");
  } else if (!version->is_number_unsigned() || version->get<uint64_t>() != 1) {
    errors.push_back("'version' must be 1, not " + version->dump());
  }
  const auto rules = doc.find("rules");
  std::vector<AlertRule> parsed;
  if (rules == doc.end()) {
    errors.push_back("'rules' is missing");
  } else if (!rules->is_array()) {
    errors.push_back("'rules' must be an array");
  } else {
    std::map<std::string, size_t> first_index;
    for (size_t i = 0; i < rules->size(); ++i) {
      AlertRule rule;
      RuleParser parser(i, (*rules)[i], &errors);
      if (!parser.Parse(&rule)) continue;
      const auto [it, inserted] = first_index.emplace(rule.name, i);
      if (!inserted) {
        errors.push_back(parser.prefix() + ": duplicate rule name (first used by rules[" + std::to_string(it->second) +
                         "])");
        continue;
      }
      parsed.push_back(std::move(rule));
    }
  }
  if (!errors.empty()) return fail();
  *out = std::move(parsed);
  if (error) error->clear();
  return true;
}

// ---------------------------------------------------------------------------
// Defaults (deploy/alerts/default_rules.json holds the same rules; a test
// checks that they are equal).

std::vector<AlertRule> DefaultAlertRules() {
  using C = AlertComparison;
  using S = AlertSeverity;
  // xprof's input-pipeline thresholds: 20 % highly, 5 % moderately input-bound;
  // 15 % kernel-launch-bound (docs/semantics-tf.md §3.3).
  constexpr double kHighlyInputBoundPct = 20;
  constexpr double kModeratelyInputBoundPct = 5;
  constexpr double kKernelLaunchBoundPct = 15;
  constexpr double kStepTimeRegressionPct = 20;
  constexpr double kMemoryNearCapacityPct = 90;
  constexpr double kStalledSeconds = 60;
  // A worker more than 20 % slower than the median worker for 3 steps in a
  // row is a straggler.
  constexpr double kStragglerPct = 20;
  constexpr uint32_t kStragglerSteps = 3;
  constexpr uint32_t kRecentSteps = 20;
  constexpr uint32_t kBaselineSteps = 100;
  // A regression is a shift, not a slow step or two: it fires after 5 steps
  // in a row over the threshold and resolves after 10 under it (and only on
  // a baseline steadier than the threshold: alerts.h).
  constexpr uint32_t kRegressionFireAfter = 5;
  constexpr uint32_t kRegressionResolveAfter = 10;
  const WindowSpec ten_seconds = WindowSpec::Duration(10 * kNsPerSecond);

  std::vector<AlertRule> rules;
  rules.push_back(MakeRule("input_bound_high", "input_pct", C::kGreaterEqual, kHighlyInputBoundPct,
                           WindowSpec::Steps(kRecentSteps), 2, 3, S::kCritical,
                           "HIGHLY input-bound: {value}% of the step time over the {window} was spent waiting for "
                           "input (threshold {threshold}%)"));
  rules.push_back(MakeRule("input_bound_moderate", "input_pct", C::kGreaterEqual, kModeratelyInputBoundPct,
                           WindowSpec::Steps(kRecentSteps), 2, 3, S::kWarning,
                           "MODERATELY input-bound: {value}% of the step time over the {window} was spent waiting "
                           "for input (threshold {threshold}%)"));
  rules.push_back(MakeRule("kernel_launch_bound", "kernel_launch_pct", C::kGreaterEqual, kKernelLaunchBoundPct,
                           WindowSpec::Steps(kRecentSteps), 1, 1, S::kWarning,
                           "Kernel-launch-bound: {value}% of the step time over the {window} was spent launching "
                           "kernels (threshold {threshold}%)"));
  AlertRule regression =
      MakeRule("step_time_regression", "step_time_ms_median", C::kGreaterEqual, kStepTimeRegressionPct,
               WindowSpec::Steps(kRecentSteps), kRegressionFireAfter, kRegressionResolveAfter, S::kWarning,
               "Step time up {value}%: median of the {window} (threshold +{threshold}%)");
  regression.baseline = WindowSpec::Steps(kBaselineSteps, kRecentSteps);
  rules.push_back(std::move(regression));
  rules.push_back(MakeRule("memory_near_capacity", "memory_used_pct", C::kGreaterEqual, kMemoryNearCapacityPct,
                           ten_seconds, 1, 1, S::kWarning,
                           "Device memory at {value}% of capacity over the {window} (threshold {threshold}%)"));
  rules.push_back(MakeRule("events_dropped", "dropped_events", C::kGreater, 0, ten_seconds, 1, 3, S::kCritical,
                           "{value} events dropped in the {window}: the analyses are missing data"));
  rules.push_back(MakeRule("training_stalled", "seconds_since_last_step", C::kGreaterEqual, kStalledSeconds,
                           ten_seconds, 1, 1, S::kCritical,
                           "Training stalled: no step has completed for {value} s (threshold {threshold} s)"));
  rules.push_back(MakeRule("straggler", "pod.straggler_pct", C::kGreater, kStragglerPct,
                           WindowSpec::Steps(kStragglerSteps), 1, 3, S::kWarning,
                           "Straggler: {worker} is at least {value}% slower than the median worker in each of its "
                           "{window} (threshold {threshold}%)"));
  return rules;
}

}  // namespace liveprof
