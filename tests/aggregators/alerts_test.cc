#include "aggregators/alerts/alerts.h"

#include "aggregators/alerts/alert_metrics.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_writer.h"

namespace liveprof::alerts_test {
namespace {

// Time values (ns) and steps used across the tests.
constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint64_t kT0 = 1'000 * kSecond;  // the first evaluation.
constexpr uint64_t kTick = kSecond;        // evaluations one second apart.
constexpr int64_t kStep0 = 100;

// Test double of MetricSource: a table of (metric, window) -> value.
class FakeSource : public MetricSource {
 public:
  void Set(std::string_view metric, const WindowSpec& w, double value, int64_t first_step = 1, int64_t last_step = 20) {
    for (Entry& e : entries_) {
      if (e.metric == metric && e.window == w) {
        e.value = MetricValue{value, first_step, last_step, 1};
        return;
      }
    }
    entries_.push_back(Entry{std::string(metric), w, MetricValue{value, first_step, last_step, 1}});
  }
  void SetSpread(std::string_view metric, const WindowSpec& w, double spread_pct) {
    for (Entry& e : entries_) {
      if (e.metric == metric && e.window == w) e.value.spread_pct = spread_pct;
    }
  }
  void Clear(std::string_view metric, const WindowSpec& w) {
    std::erase_if(entries_, [&](const Entry& e) { return e.metric == metric && e.window == w; });
  }
  std::optional<MetricValue> Get(std::string_view metric, const WindowSpec& w) const override {
    ++calls_;
    for (const Entry& e : entries_) {
      if (e.metric == metric && e.window == w) return e.value;
    }
    return std::nullopt;
  }
  int calls() const { return calls_; }

 private:
  struct Entry {
    std::string metric;
    WindowSpec window;
    MetricValue value;
  };
  std::vector<Entry> entries_;
  mutable int calls_ = 0;
};

AlertRule Rule(std::string name, std::string metric, AlertComparison cmp, double threshold, WindowSpec window,
               uint32_t fire_after = 1, uint32_t resolve_after = 1) {
  AlertRule r;
  r.name = std::move(name);
  r.metric = std::move(metric);
  r.comparison = cmp;
  r.threshold = threshold;
  r.window = window;
  r.fire_after = fire_after;
  r.resolve_after = resolve_after;
  return r;
}

const AlertRuleStatus& StatusOf(const AlertsSnapshot& s, std::string_view name) {
  for (const AlertRuleStatus& r : s.rules) {
    if (r.rule.name == name) return r;
  }
  FAIL("no rule " << name);
  return s.rules.front();
}

AlertState StateOf(const AlertEngine& engine, std::string_view name) { return StatusOf(engine.Snapshot(), name).state; }

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ParseError(std::string_view json) {
  std::vector<AlertRule> rules;
  std::string error;
  CHECK_FALSE(ParseAlertRules(json, &rules, &error));
  return error;
}

// A rules file with one rule whose body (the text inside the braces) is given.
std::string OneRule(std::string_view body) {
  return std::string(R"({"version":1,"rules":[{)") + std::string(body) + "}]}";
}
constexpr std::string_view kGoodBody = R"("name":"x","metric":"input_pct","comparison":">=","threshold":5,)"
                                       R"("window":{"steps":20},"severity":"warning")";

}  // namespace

TEST_CASE("alerts: hysteresis fires after k consecutive breaches and resolves after m clears") {
  const WindowSpec w = WindowSpec::Steps(20);
  AlertEngine engine({Rule("r", "input_pct", AlertComparison::kGreaterEqual, 20, w, 3, 2)});
  FakeSource src;
  int64_t step = kStep0;
  uint64_t now = kT0;
  // One evaluation per step; value 25 breaches (>= 20), 10 is clear.
  auto eval = [&](double value) {
    src.Set("input_pct", w, value, step - 19, step);
    auto events = engine.Evaluate(src, now, step);
    ++step;
    now += kTick;
    return events;
  };
  CHECK(eval(25).empty());
  CHECK(StateOf(engine, "r") == AlertState::kPending);
  CHECK(eval(25).empty());
  CHECK(StatusOf(engine.Snapshot(), "r").breaching_count == 2);
  // One clear evaluation resets the count: three more breaches are needed.
  CHECK(eval(10).empty());
  CHECK(StateOf(engine, "r") == AlertState::kOk);
  CHECK(StatusOf(engine.Snapshot(), "r").breaching_count == 0);
  CHECK(eval(25).empty());
  CHECK(eval(25).empty());
  CHECK(StateOf(engine, "r") == AlertState::kPending);
  const uint64_t fire_time = now;
  auto fired = eval(25);  // the third in a row.
  REQUIRE(fired.size() == 1);
  CHECK(fired[0].rule == "r");
  CHECK(fired[0].state == AlertEventState::kFiring);
  CHECK(fired[0].value == 25);
  CHECK(fired[0].threshold == 20);
  CHECK(fired[0].ts_ns == fire_time);
  CHECK(fired[0].first_step == kStep0 + 5 - 19);
  CHECK(fired[0].last_step == kStep0 + 5);
  CHECK(fired[0].window == w);
  CHECK(fired[0].window_text == "last 20 steps");
  CHECK(StateOf(engine, "r") == AlertState::kFiring);
  CHECK(engine.Snapshot().firing.size() == 1);
  // Firing: one clear is not enough (resolve_after 2); a breach resets it.
  CHECK(eval(10).empty());
  CHECK(StateOf(engine, "r") == AlertState::kResolving);
  CHECK(engine.Snapshot().firing.size() == 1);  // still firing while resolving.
  CHECK(StatusOf(engine.Snapshot(), "r").clear_count == 1);
  CHECK(eval(25).empty());
  CHECK(StateOf(engine, "r") == AlertState::kFiring);
  CHECK(StatusOf(engine.Snapshot(), "r").clear_count == 0);
  CHECK(eval(10).empty());
  const uint64_t resolve_time = now;
  auto resolved = eval(10);
  REQUIRE(resolved.size() == 1);
  CHECK(resolved[0].state == AlertEventState::kResolved);
  CHECK(resolved[0].value == 10);
  CHECK(resolved[0].ts_ns == resolve_time);
  const AlertsSnapshot s = engine.Snapshot();
  CHECK(StatusOf(s, "r").state == AlertState::kOk);
  CHECK(StatusOf(s, "r").since_ns == resolve_time);
  CHECK(StatusOf(s, "r").evaluations == 10);
  CHECK(s.firing.empty());
  REQUIRE(s.history.size() == 2);
  CHECK(s.history[0] == fired[0]);
  CHECK(s.history[1] == resolved[0]);
  CHECK(s.evaluations == 10);
  // A view may ask for the newest events only; the rest count as dropped.
  const AlertsSnapshot newest = engine.Snapshot(1);
  REQUIRE(newest.history.size() == 1);
  CHECK(newest.history[0] == resolved[0]);
  CHECK(newest.history_dropped == s.history_dropped + 1);
}

TEST_CASE("alerts: fire_after 1 and resolve_after 1 switch on the first evaluation") {
  const WindowSpec w = WindowSpec::Duration(10 * kSecond);
  AlertEngine engine({Rule("r", "memory_used_pct", AlertComparison::kGreaterEqual, 90, w)});
  FakeSource src;
  src.Set("memory_used_pct", w, 95);
  CHECK(engine.Evaluate(src, kT0, kStep0).size() == 1);
  src.Set("memory_used_pct", w, 50);
  CHECK(engine.Evaluate(src, kT0 + kTick, kStep0).size() == 1);
  CHECK(StateOf(engine, "r") == AlertState::kOk);
}

TEST_CASE("alerts: input-bound boundaries 4.99 / 5 / 19.99 / 20 % with >=") {
  // The two default input rules (fire_after 2): evaluate each value on two steps.
  std::vector<AlertRule> rules;
  for (const AlertRule& r : DefaultAlertRules()) {
    if (r.metric == "input_pct") rules.push_back(r);
  }
  REQUIRE(rules.size() == 2);
  struct Case {
    double input_pct;
    AlertState high;
    AlertState moderate;
  };
  const Case cases[] = {
      {4.99, AlertState::kOk, AlertState::kOk},
      {5, AlertState::kOk, AlertState::kFiring},
      {19.99, AlertState::kOk, AlertState::kFiring},
      {20, AlertState::kFiring, AlertState::kFiring},
  };
  for (const Case& c : cases) {
    CAPTURE(c.input_pct);
    AlertEngine engine(rules);
    FakeSource src;
    src.Set("input_pct", WindowSpec::Steps(20), c.input_pct);
    engine.Evaluate(src, kT0, kStep0);
    engine.Evaluate(src, kT0 + kTick, kStep0 + 1);
    CHECK(StateOf(engine, "input_bound_high") == c.high);
    CHECK(StateOf(engine, "input_bound_moderate") == c.moderate);
  }
}

TEST_CASE("alerts: >, <= and < at their boundaries") {
  const WindowSpec w = WindowSpec::Duration(10 * kSecond);
  struct Case {
    AlertComparison cmp;
    double value;
    bool breaches;
  };
  const Case cases[] = {
      {AlertComparison::kGreater, 0, false},       {AlertComparison::kGreater, 1, true},
      {AlertComparison::kGreater, 0.001, true},    {AlertComparison::kLessEqual, 10, true},
      {AlertComparison::kLessEqual, 10.01, false}, {AlertComparison::kLess, 10, false},
      {AlertComparison::kLess, 9.99, true},        {AlertComparison::kGreaterEqual, 10, true},
  };
  for (const Case& c : cases) {
    CAPTURE(AlertComparisonText(c.cmp));
    CAPTURE(c.value);
    // Threshold 0 for ">" (dropped events), 10 otherwise.
    const double threshold = c.cmp == AlertComparison::kGreater ? 0 : 10;
    AlertEngine engine({Rule("r", "gpu_utilization_pct", c.cmp, threshold, w)});
    FakeSource src;
    src.Set("gpu_utilization_pct", w, c.value);
    CHECK(engine.Evaluate(src, kT0, kStep0).size() == (c.breaches ? 1u : 0u));
  }
}

TEST_CASE("alerts: baseline regression is 100 x (recent / baseline - 1)") {
  AlertRule rule = DefaultAlertRules()[3];
  REQUIRE(rule.name == "step_time_regression");
  rule.fire_after = 1;  // the value on one evaluation (the default's 5: the next test).
  const WindowSpec recent = WindowSpec::Steps(20);
  const WindowSpec base = WindowSpec::Steps(100, 20);
  REQUIRE(rule.window == recent);
  REQUIRE(rule.baseline == base);
  struct Case {
    double recent_ms;
    double baseline_ms;
    double pct;  // the rule's value.
    bool fires;  // >= 20.
  };
  const Case cases[] = {
      {120, 100, 20, true},         // 100 × (120/100 − 1) = 20, exactly the threshold.
      {119.99, 100, 19.99, false},  // 100 × 0.1999 = 19.99 (to rounding).
      {150, 100, 50, true},         // 100 × 0.5.
      {75, 100, -25, false},        // faster: 100 × (0.75 − 1).
      {12.5, 10, 25, true},         // 100 × (1.25 − 1).
  };
  for (const Case& c : cases) {
    CAPTURE(c.recent_ms);
    AlertEngine engine({rule});
    FakeSource src;
    src.Set("step_time_ms_median", recent, c.recent_ms, 181, 200);
    src.Set("step_time_ms_median", base, c.baseline_ms, 81, 180);
    const auto events = engine.Evaluate(src, kT0, 200);
    const AlertRuleStatus st = StatusOf(engine.Snapshot(), rule.name);
    REQUIRE(st.value.has_value());
    CHECK(*st.value == doctest::Approx(c.pct).epsilon(1e-12));
    CHECK(events.size() == (c.fires ? 1u : 0u));
    if (c.fires) {
      CHECK(events[0].first_step == 181);  // the recent window's steps.
      CHECK(events[0].last_step == 200);
      CHECK(events[0].baseline == base);
      CHECK(events[0].window_text == "last 20 steps vs the 100 steps before");
    }
  }
  // Exactly 20: no rounding below the threshold.
  {
    AlertEngine engine({rule});
    FakeSource src;
    src.Set("step_time_ms_median", recent, 120);
    src.Set("step_time_ms_median", base, 100);
    engine.Evaluate(src, kT0, 200);
    CHECK(*StatusOf(engine.Snapshot(), rule.name).value == 20.0);
  }
  // A missing or zero baseline makes the value missing.
  for (const double b : {0.0, -1.0}) {
    AlertEngine engine({rule});
    FakeSource src;
    src.Set("step_time_ms_median", recent, 120);
    src.Set("step_time_ms_median", base, b);
    CHECK(engine.Evaluate(src, kT0, 200).empty());
    CHECK(StatusOf(engine.Snapshot(), rule.name).missing == 1);
    CHECK_FALSE(StatusOf(engine.Snapshot(), rule.name).value.has_value());
  }
  {
    AlertEngine engine({rule});
    FakeSource src;
    src.Set("step_time_ms_median", recent, 120);
    CHECK(engine.Evaluate(src, kT0, 200).empty());
    CHECK(StatusOf(engine.Snapshot(), rule.name).missing == 1);
  }
}

TEST_CASE("alerts: a regression needs a stable baseline and 5 steps in a row, noise never flaps it") {
  const AlertRule rule = DefaultAlertRules()[3];
  REQUIRE(rule.name == "step_time_regression");
  CHECK(rule.fire_after == 5);
  CHECK(rule.resolve_after == 10);
  const WindowSpec recent = rule.window, base = *rule.baseline;
  int64_t step = 200;
  auto eval = [&](AlertEngine& engine, FakeSource& src, double recent_ms) {
    src.Set("step_time_ms_median", recent, recent_ms);
    ++step;
    return engine.Evaluate(src, kT0 + static_cast<uint64_t>(step) * kTick, step);
  };
  {  // A baseline scattering 35 % (over the 20 % threshold): no value, whatever the change.
    AlertEngine engine({rule});
    FakeSource src;
    src.Set("step_time_ms_median", base, 100);
    src.SetSpread("step_time_ms_median", base, 35);
    for (int i = 0; i < 20; ++i) CHECK(eval(engine, src, 150).empty());
    const AlertRuleStatus st = StatusOf(engine.Snapshot(), rule.name);
    CHECK(st.missing == 20);
    CHECK_FALSE(st.value.has_value());
    CHECK(st.state == AlertState::kOk);
  }
  {  // A steady baseline (5 %): a median that flips between two modes, +25 %
     // one step and 0 the next, never fires; a shift held 5 steps does, and
     // resolves after 10 steps back.
    AlertEngine engine({rule});
    FakeSource src;
    src.Set("step_time_ms_median", base, 100);
    src.SetSpread("step_time_ms_median", base, 5);
    for (int i = 0; i < 40; ++i) CHECK(eval(engine, src, i % 2 == 0 ? 125 : 100).empty());
    for (int i = 0; i < 4; ++i) CHECK(eval(engine, src, 130).empty());
    const auto fired = eval(engine, src, 130);
    REQUIRE(fired.size() == 1);
    CHECK(fired[0].state == AlertEventState::kFiring);
    CHECK(fired[0].value == doctest::Approx(30));
    for (int i = 0; i < 9; ++i) CHECK(eval(engine, src, 101).empty());
    const auto resolved = eval(engine, src, 101);
    REQUIRE(resolved.size() == 1);
    CHECK(resolved[0].state == AlertEventState::kResolved);
    CHECK(resolved[0].summary ==
          "step_time_regression resolved: step_time_ms_median change +1% < +20% over the last 20 steps vs "
          "the 100 steps before");
  }
}

TEST_CASE("alerts: a resolved event says what cleared, in the value's unit") {
  const std::vector<AlertRule> d = DefaultAlertRules();
  CHECK(RenderResolvedSummary(d[0], 2.56) == "input_bound_high resolved: input_pct 2.56% < 20% over the last 20 steps");
  AlertRule stalled;
  for (const AlertRule& r : d) {
    if (r.name == "training_stalled") stalled = r;
  }
  CHECK(RenderResolvedSummary(stalled, 0.5) ==
        "training_stalled resolved: seconds_since_last_step 0.5 s < 60 s over the last 10 s");
  AlertRule low = Rule("low_util", "gpu_utilization_pct", AlertComparison::kLess, 30, WindowSpec::Duration(kSecond));
  CHECK(RenderResolvedSummary(low, 55, "rank 1") ==
        "low_util resolved: gpu_utilization_pct of rank 1 55% >= 30% over the last 1 s");
  CHECK(AlertValueUnit("input_pct", false) == "%");
  CHECK(AlertValueUnit("step_time_ms_median", false) == "ms");
  CHECK(AlertValueUnit("step_time_ms_median", true) == "%");
  CHECK(AlertValueUnit("seconds_since_last_step", false) == "s");
  CHECK(AlertValueUnit("dropped_events", false) == "events");
  CHECK(AlertValueUnit("pod.straggler_pct", false) == "%");
}

TEST_CASE("alerts: a missing metric keeps the state and the counts") {
  const WindowSpec w = WindowSpec::Duration(10 * kSecond);
  AlertEngine engine({Rule("r", "seconds_since_last_step", AlertComparison::kGreaterEqual, 60, w, 2, 2)});
  FakeSource src;
  uint64_t now = kT0;
  auto eval = [&] {
    auto events = engine.Evaluate(src, now, kStep0);
    now += kTick;
    return events;
  };
  CHECK(eval().empty());  // nothing known yet.
  CHECK(StatusOf(engine.Snapshot(), "r").missing == 1);
  CHECK(StateOf(engine, "r") == AlertState::kOk);

  src.Set("seconds_since_last_step", w, 61);
  CHECK(eval().empty());
  CHECK(StateOf(engine, "r") == AlertState::kPending);
  src.Clear("seconds_since_last_step", w);
  CHECK(eval().empty());  // missing: still pending, count still 1.
  CHECK(StateOf(engine, "r") == AlertState::kPending);
  CHECK(StatusOf(engine.Snapshot(), "r").breaching_count == 1);
  src.Set("seconds_since_last_step", w, 62);
  CHECK(eval().size() == 1);  // 1 + 1 consecutive present breaches.

  // A NaN counts as missing too.
  src.Set("seconds_since_last_step", w, 1);
  CHECK(eval().empty());
  CHECK(StateOf(engine, "r") == AlertState::kResolving);
  src.Set("seconds_since_last_step", w, std::numeric_limits<double>::quiet_NaN());
  CHECK(eval().empty());
  CHECK(StateOf(engine, "r") == AlertState::kResolving);
  CHECK(StatusOf(engine.Snapshot(), "r").clear_count == 1);
  CHECK(*StatusOf(engine.Snapshot(), "r").value == 1);
  src.Set("seconds_since_last_step", w, 2);
  CHECK(eval().size() == 1);
  const AlertRuleStatus st = StatusOf(engine.Snapshot(), "r");
  CHECK(st.state == AlertState::kOk);
  CHECK(st.missing == 3);
  CHECK(st.evaluations == 4);
}

TEST_CASE("alerts: a step-window rule advances once per step, a seconds-window rule every call") {
  const WindowSpec steps = WindowSpec::Steps(20);
  const WindowSpec secs = WindowSpec::Duration(10 * kSecond);
  AlertEngine engine({Rule("s", "input_pct", AlertComparison::kGreaterEqual, 20, steps, 2),
                      Rule("t", "memory_used_pct", AlertComparison::kGreaterEqual, 90, secs, 2)});
  FakeSource src;
  src.Set("input_pct", steps, 30);
  src.Set("memory_used_pct", secs, 95);
  CHECK(engine.Evaluate(src, kT0, kStep0).empty());
  const auto second = engine.Evaluate(src, kT0 + kTick, kStep0);  // same step.
  REQUIRE(second.size() == 1);
  CHECK(second[0].rule == "t");
  CHECK(StateOf(engine, "s") == AlertState::kPending);
  CHECK(StatusOf(engine.Snapshot(), "s").evaluations == 1);
  const auto third = engine.Evaluate(src, kT0 + 2 * kTick, kStep0 + 1);
  REQUIRE(third.size() == 1);
  CHECK(third[0].rule == "s");
}

TEST_CASE("alerts: SetRules keeps, resets and resolves as specified") {
  const WindowSpec w = WindowSpec::Steps(20);
  const WindowSpec secs = WindowSpec::Duration(10 * kSecond);
  AlertRule keep = Rule("keep", "input_pct", AlertComparison::kGreaterEqual, 20, w);
  AlertRule keep_pending = Rule("keep_pending", "input_pct", AlertComparison::kGreaterEqual, 20, w, 3);
  AlertRule change = Rule("change", "kernel_launch_pct", AlertComparison::kGreaterEqual, 15, w);
  AlertRule removed = Rule("removed", "memory_used_pct", AlertComparison::kGreaterEqual, 90, secs);
  AlertRule removed_pending = Rule("removed_pending", "memory_used_pct", AlertComparison::kGreaterEqual, 90, secs, 5);
  AlertEngine engine({keep, keep_pending, change, removed, removed_pending});
  FakeSource src;
  src.Set("input_pct", w, 30, 81, 100);
  src.Set("kernel_launch_pct", w, 40, 81, 100);
  src.Set("memory_used_pct", secs, 95, -1, -1);
  CHECK(engine.Evaluate(src, kT0, kStep0).size() == 3);  // keep, change, removed.
  CHECK(engine.Evaluate(src, kT0 + kTick, kStep0 + 1).empty());
  // keep_pending has 2 of 3 breaches; removed_pending 2 of 5.
  CHECK(StatusOf(engine.Snapshot(), "keep_pending").breaching_count == 2);
  const uint64_t last_eval = kT0 + kTick;

  AlertRule keep2 = keep;
  keep2.threshold = 25;  // same name, metric and comparison: state kept.
  keep2.severity = AlertSeverity::kCritical;
  AlertRule change2 = change;
  change2.comparison = AlertComparison::kGreater;  // reset.
  AlertRule added = Rule("added", "late_events", AlertComparison::kGreater, 0, secs);
  engine.SetRules({added, change2, keep_pending, keep2});

  AlertsSnapshot s = engine.Snapshot();
  REQUIRE(s.rules.size() == 4);
  CHECK(s.rules[0].rule.name == "added");  // new order.
  CHECK(s.rules[0].state == AlertState::kOk);
  CHECK(s.rules[0].evaluations == 0);
  CHECK(s.rules[1].rule == change2);
  CHECK(s.rules[1].state == AlertState::kOk);  // reset.
  CHECK(s.rules[1].evaluations == 0);
  CHECK(s.rules[2].breaching_count == 2);  // kept.
  CHECK(s.rules[2].state == AlertState::kPending);
  CHECK(s.rules[3].rule == keep2);
  CHECK(s.rules[3].state == AlertState::kFiring);  // kept, no new event.
  CHECK(s.rules[3].evaluations == 2);
  REQUIRE(s.firing.size() == 1);
  CHECK(s.firing[0].rule == "keep");
  // The resolved events are in the history already...
  REQUIRE(s.history.size() == 5);
  CHECK(s.history[3].rule == "change");
  CHECK(s.history[3].state == AlertEventState::kResolved);
  CHECK(s.history[3].summary.ends_with(" (rule changed)"));
  CHECK(s.history[3].ts_ns == last_eval);
  CHECK(s.history[3].value == 40);
  CHECK(s.history[3].last_step == 100);
  CHECK(s.history[4].rule == "removed");
  CHECK(s.history[4].state == AlertEventState::kResolved);
  CHECK(s.history[4].summary.ends_with(" (rule removed)"));
  // ...and the next Evaluate returns them first. removed_pending resolves nothing.
  src.Set("late_events", secs, 0);
  const auto events = engine.Evaluate(src, kT0 + 2 * kTick, kStep0 + 2);
  REQUIRE(events.size() == 4);
  CHECK(events[0] == s.history[3]);
  CHECK(events[1] == s.history[4]);
  CHECK(events[2].rule == "change");  // fresh, fires again under ">".
  CHECK(events[2].state == AlertEventState::kFiring);
  CHECK(events[3].rule == "keep_pending");  // third breach in a row.
  CHECK(events[3].state == AlertEventState::kFiring);
  CHECK(engine.Evaluate(src, kT0 + 3 * kTick, kStep0 + 3).empty());  // returned once.
  // The kept rule runs under its new threshold: 24 is clear of 25.
  src.Set("input_pct", w, 24);
  const auto resolved = engine.Evaluate(src, kT0 + 4 * kTick, kStep0 + 4);
  REQUIRE(resolved.size() == 1);  // keep_pending (>= 20) still breaches.
  CHECK(resolved[0].rule == "keep");
  CHECK(resolved[0].threshold == 25);
  CHECK(resolved[0].severity == AlertSeverity::kCritical);
}

TEST_CASE("alerts: history keeps the newest 1000 events and counts the dropped") {
  const WindowSpec w = WindowSpec::Duration(10 * kSecond);
  AlertEngine engine({Rule("flap", "dropped_events", AlertComparison::kGreater, 0, w)});
  FakeSource src;
  constexpr int kEvaluations = 1234;  // each one a transition (k = m = 1).
  for (int i = 0; i < kEvaluations; ++i) {
    src.Set("dropped_events", w, i % 2 == 0 ? 5 : 0);
    CHECK(engine.Evaluate(src, kT0 + i * kTick, kStep0).size() == 1);
  }
  const AlertsSnapshot s = engine.Snapshot();
  REQUIRE(s.history.size() == 1000);
  CHECK(s.history_dropped == kEvaluations - 1000);
  CHECK(s.history.front().ts_ns == kT0 + (kEvaluations - 1000) * kTick);
  CHECK(s.history.back().ts_ns == kT0 + (kEvaluations - 1) * kTick);
  CHECK(s.history.back().state == AlertEventState::kResolved);  // i = 1233 is odd.
}

TEST_CASE("alerts: summaries and window texts") {
  const AlertRule high = DefaultAlertRules()[0];
  CHECK(RenderAlertSummary(high, 23.456) ==
        "HIGHLY input-bound: 23.46% of the step time over the last 20 steps was spent waiting "
        "for input (threshold 20%)");
  CHECK(RenderAlertSummary(DefaultAlertRules()[5], 3) ==
        "3 events dropped in the last 10 s: the analyses are missing data");
  AlertRule plain = Rule("p", "late_events", AlertComparison::kGreater, 0.5, WindowSpec::Duration(kSecond / 2));
  CHECK(RenderAlertSummary(plain, 7) == "p: late_events 7 > 0.5 over the last 500 ms");
  plain.summary = "{value} {unknown} {window";
  CHECK(RenderAlertSummary(plain, -0.001) == "0 {unknown} {window");
  CHECK(AlertWindowText(WindowSpec::Steps(1), std::nullopt) == "last step");
  CHECK(AlertWindowText(WindowSpec::Duration(90 * kSecond), std::nullopt) == "last 90 s");
  CHECK(AlertWindowText(WindowSpec::Steps(10), WindowSpec::Steps(50, 30)) ==
        "last 10 steps vs the 50 steps ending 30 steps back");
}

TEST_CASE("alerts: parse errors name what and where") {
  // Syntax: the byte offset of the offending character (0-based).
  CHECK(ParseError(R"({"version":1,})") ==
        "invalid JSON at byte 13 (line 1, column 14): syntax error while parsing object key - "
        "unexpected '}'; expected string literal");
  CHECK(ParseError("{\"version\":1,\n\"rules\":[1 2]}").starts_with("invalid JSON at byte 25 (line 2, column 12): "));
  CHECK(ParseError("").starts_with("invalid JSON at byte 0 (line 1, column 1): "));
  // Wrong type.
  CHECK(ParseError(OneRule(R"("name":"input_bound_high","metric":"input_pct","comparison":">=",)"
                           R"("threshold":"20","window":{"steps":20},"severity":"critical")")) ==
        "rules[0] 'input_bound_high': 'threshold' must be a number");
  // Unknown field (a typo must not silently drop the threshold).
  CHECK(ParseError(OneRule(std::string(kGoodBody) + R"(,"treshold":7)")) ==
        "rules[0] 'x': unknown field 'treshold' (known fields: name, metric, comparison, "
        "threshold, window, baseline, fire_after, resolve_after, severity, summary)");
  CHECK(ParseError(OneRule(R"("name":"x","metric":"input_pct","comparison":">=","threshold":5,)"
                           R"("window":{"steps":20,"offset_steps":3},"severity":"warning")")) ==
        "rules[0] 'x': unknown field 'window.offset_steps' (known fields: steps, seconds)");
  // Unknown metric, listing the known ones.
  CHECK(ParseError(OneRule(R"("name":"x","metric":"input_percent","comparison":">=","threshold":5,)"
                           R"("window":{"steps":20},"severity":"warning")")) ==
        "rules[0] 'x': unknown metric 'input_percent' (known metrics: input_pct, "
        "kernel_launch_pct, all_others_pct, device_collectives_pct, step_time_ms_median, "
        "step_time_ms_mean, memory_used_pct, dropped_events, late_events, "
        "seconds_since_last_step, gpu_utilization_pct, pod.straggler_pct)");
  // Duplicate rule names.
  const std::string good = std::string("{") + std::string(kGoodBody) + "}";
  CHECK(ParseError(R"({"version":1,"rules":[)" + good + "," + good + "]}") ==
        "rules[1] 'x': duplicate rule name (first used by rules[0])");
  // A key given twice inside one rule.
  CHECK(ParseError(OneRule(std::string(kGoodBody) + R"(,"threshold":6)")) == "rules[0] 'x': duplicate key 'threshold'");
  CHECK(ParseError(OneRule(R"("name":"x","metric":"input_pct","comparison":">=","threshold":5,)"
                           R"("window":{"steps":20,"steps":30},"severity":"warning")")) ==
        "rules[0] 'x': duplicate key 'window.steps'");
  CHECK(ParseError(R"({"version":1,"version":1,"rules":[]})") == "top level: duplicate key 'version'");
  // Two "rules" keys, the kept (last) one shorter than the duplicate's index.
  CHECK(ParseError(R"({"version":1,"rules":[{},{"a":1,"a":2}],"rules":[]})") ==
        "rules[1]: duplicate key 'a'\ntop level: duplicate key 'rules'");
  // The rest of the schema.
  CHECK(ParseError(R"({"version":2,"rules":[]})") == "'version' must be 1, not 2");
  CHECK(ParseError(R"({"rules":[]})") == "'version' is missing (this build reads version 1)");
  CHECK(ParseError(R"({"version":1,"rule":[]})") ==
        "unknown top-level field 'rule' (known fields: version, rules)\n'rules' is missing");
  CHECK(ParseError(R"([1])") == "the top level must be an object: {\"version\": 1, \"rules\": [...]}");
  CHECK(ParseError(R"({"version":1,"rules":[7]})") == "rules[0]: must be an object");
  CHECK(ParseError(OneRule(R"("metric":"input_pct","comparison":"=>","threshold":5,)"
                           R"("window":{"steps":0},"severity":"fatal","fire_after":0)")) ==
        "rules[0]: 'name' is missing\n"
        "rules[0]: 'comparison' must be one of \">=\", \">\", \"<=\", \"<\"\n"
        "rules[0]: 'window.steps' must be a whole number from 1 to 4294967295\n"
        "rules[0]: 'fire_after' must be a whole number from 1 to 4294967295\n"
        "rules[0]: 'severity' must be one of \"critical\", \"warning\", \"info\"");
  CHECK(ParseError(OneRule(std::string(kGoodBody) + R"(,"summary":"at {valeu}%")")) ==
        "rules[0] 'x': 'summary' has an unknown placeholder '{valeu}' (known: {value}, "
        "{threshold}, {window}, {worker})");
  CHECK(ParseError(OneRule(std::string(kGoodBody) + R"(,"baseline":{"steps":100})")) ==
        "rules[0] 'x': 'baseline.offset_steps' is missing");
  CHECK(ParseError(OneRule(R"("name":"bad name","metric":"input_pct","comparison":">=","threshold":5,)"
                           R"("window":{"seconds":0},"severity":"warning","resolve_after":1.5)")) ==
        "rules[0] 'bad name': 'name' must be a string of 1 to 128 characters from A-Z a-z 0-9 "
        "_ . : -\n"
        "rules[0] 'bad name': 'window.seconds' must be a number of seconds above 0 and at most "
        "1e9\n"
        "rules[0] 'bad name': 'resolve_after' must be a whole number from 1 to 4294967295");
  // A failed parse leaves the output alone; a null error pointer is fine.
  std::vector<AlertRule> rules = DefaultAlertRules();
  CHECK_FALSE(ParseAlertRules("{", &rules, nullptr));
  CHECK(rules == DefaultAlertRules());
  CHECK_FALSE(ParseAlertRules("{}", nullptr, nullptr));
}

TEST_CASE("alerts: mangled rules files give errors, never a crash") {
  const std::string good = AlertRulesToJson(DefaultAlertRules());
  const std::string alphabet = "{}[]\":,0123456789-+.eE \\ntrufalsnx\xff";
  std::mt19937 rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: text[at] = c; break;
        case 1: text.erase(at, 1 + rng() % 8); break;
        default: text.insert(at, 1, c); break;
      }
    }
    std::vector<AlertRule> rules;
    std::string error;
    if (!ParseAlertRules(text, &rules, &error)) {
      CHECK_FALSE(error.empty());
      CHECK(rules.empty());
    }
  }
}

TEST_CASE("alerts: a valid file parses, omitted counts default to 1") {
  std::vector<AlertRule> rules;
  std::string error = "stale";
  REQUIRE(ParseAlertRules(OneRule(std::string(kGoodBody) + R"(,"summary":"{value} over {window}")"), &rules, &error));
  CHECK(error.empty());
  REQUIRE(rules.size() == 1);
  CHECK(rules[0].name == "x");
  CHECK(rules[0].fire_after == 1);
  CHECK(rules[0].resolve_after == 1);
  CHECK(rules[0].window == WindowSpec::Steps(20));
  CHECK_FALSE(rules[0].baseline.has_value());
  REQUIRE(ParseAlertRules(R"({"version":1,"rules":[]})", &rules, &error));
  CHECK(rules.empty());
  REQUIRE(ParseAlertRules(OneRule(R"("name":"m","metric":"memory_used_pct","comparison":"<","threshold":-1.5e1,)"
                                  R"("window":{"seconds":0.25},"severity":"info")"),
                          &rules, &error));
  CHECK(rules[0].window == WindowSpec::Duration(kSecond / 4));
  CHECK(rules[0].threshold == -15);
  CHECK(rules[0].comparison == AlertComparison::kLess);
  CHECK(rules[0].severity == AlertSeverity::kInfo);
}

TEST_CASE("alerts: deploy/alerts/default_rules.json equals the built-in defaults") {
  // The file sits two directories above this test's source.
  const std::filesystem::path file =
      std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "deploy" / "alerts" / "default_rules.json";
  const std::string text = ReadFile(file);
  REQUIRE_MESSAGE(!text.empty(), "cannot read " << file);
  std::vector<AlertRule> rules;
  std::string error;
  REQUIRE_MESSAGE(ParseAlertRules(text, &rules, &error), error);
  const std::vector<AlertRule> defaults = DefaultAlertRules();
  REQUIRE(rules.size() == defaults.size());
  for (size_t i = 0; i < rules.size(); ++i) {
    CAPTURE(defaults[i].name);
    CHECK(rules[i] == defaults[i]);
  }
  // And the writer's format reads back equal.
  std::vector<AlertRule> round_trip;
  REQUIRE(ParseAlertRules(AlertRulesToJson(defaults), &round_trip, &error));
  CHECK(round_trip == defaults);
  std::vector<AlertRule> odd = {defaults[3]};
  odd[0].baseline = WindowSpec::Steps(7, 0);  // offset 0 is written out too.
  odd[0].window = WindowSpec::Duration(1'500'000'001);
  odd[0].threshold = 0.1;
  REQUIRE(ParseAlertRules(AlertRulesToJson(odd), &round_trip, &error));
  CHECK(round_trip == odd);
}

TEST_CASE("alerts: WriteJson is valid JSON with the expected fields, CSV has one row per event") {
  std::vector<AlertRule> rules = DefaultAlertRules();
  rules[3].fire_after = 1;  // fires on this one evaluation.
  AlertEngine engine(rules);
  FakeSource src;
  src.Set("step_time_ms_median", WindowSpec::Steps(20), 150, 181, 200);
  src.Set("step_time_ms_median", WindowSpec::Steps(100, 20), 100, 81, 180);
  src.Set("dropped_events", WindowSpec::Duration(10 * kSecond), 3, -1, -1);
  src.Set("input_pct", WindowSpec::Steps(20), 7.5, 181, 200);
  engine.Evaluate(src, kT0, 200);
  src.Set("dropped_events", WindowSpec::Duration(10 * kSecond), 0, -1, -1);
  engine.Evaluate(src, kT0 + kTick, 200);  // no new step: step-window rules wait.
  const AlertsSnapshot s = engine.Snapshot();

  JsonWriter w;
  s.WriteJson(w);
  const nlohmann::json j = nlohmann::json::parse(w.str());
  REQUIRE(j["rules"].size() == rules.size());
  const nlohmann::json& regression = j["rules"][3];
  CHECK(regression["name"] == "step_time_regression");
  CHECK(regression["metric"] == "step_time_ms_median");
  CHECK(regression["comparison"] == ">=");
  CHECK(regression["threshold"] == 20);
  CHECK(regression["window"] == nlohmann::json{{"steps", 20}});
  CHECK(regression["baseline"] == nlohmann::json{{"steps", 100}, {"offset_steps", 20}});
  CHECK(regression["window_text"] == "last 20 steps vs the 100 steps before");
  CHECK(regression["unit"] == "%");
  CHECK(j["rules"][0]["unit"] == "%");
  CHECK(j["rules"][5]["unit"] == "events");
  CHECK(regression["state"] == "firing");
  CHECK(regression["value"] == 50);  // 100 × (150/100 − 1).
  CHECK(regression["severity"] == "warning");
  CHECK(regression["fire_after"] == 1);
  CHECK(regression["evaluations"] == 1);
  CHECK(regression["missing"] == 0);
  CHECK(j["rules"][1]["state"] == "pending");  // input 7.5 >= 5: 1 of 2.
  CHECK(j["rules"][0]["value"] == 7.5);
  CHECK(j["rules"][4]["value"].is_null());  // memory: never known.
  CHECK(j["rules"][4]["missing"] == 2);
  CHECK(j["rules"][5]["state"] == "resolving");  // dropped: 1 of 3 clears.
  CHECK(j["rules"][5]["window"] == nlohmann::json{{"seconds", 10}});
  REQUIRE(j["firing"].size() == 2);
  const nlohmann::json& e = j["firing"][0];
  CHECK(e["rule"] == "step_time_regression");
  CHECK(e["state"] == "firing");
  CHECK(e["severity"] == "warning");
  CHECK(e["value"] == 50);
  CHECK(e["threshold"] == 20);
  CHECK(e["comparison"] == ">=");
  CHECK(e["first_step"] == 181);
  CHECK(e["last_step"] == 200);
  CHECK(e["ts_ns"] == kT0);
  CHECK(e["summary"] ==
        "Step time up 50%: median of the last 20 steps vs the 100 steps before (threshold "
        "+20%)");
  CHECK(e["window_text"] == "last 20 steps vs the 100 steps before");
  CHECK(e["baseline"]["offset_steps"] == 20);
  CHECK(j["history"].size() == 2);
  CHECK(j["history_dropped"] == 0);
  CHECK(j["evaluations"] == 2);
  CHECK(j["last_evaluated_ns"] == kT0 + kTick);
  CHECK(j["last_evaluated_step"] == 200);

  const std::string csv = s.ToCsv();
  CHECK(
      csv.starts_with("ts_ns,rule,metric,severity,state,value,comparison,threshold,window,"
                      "first_step,last_step,summary\n"));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);
  CHECK(csv.find("1000000000000,events_dropped,dropped_events,critical,firing,3,>,0,"
                 "last 10 s,-1,-1,3 events dropped in the last 10 s: the analyses are missing "
                 "data\n") != std::string::npos);
}

// Randomized: the engine evaluated in one go, the engine evaluated in chunks
// with Snapshot() and SetRules(same rules) in between, and a naive reference
// that recomputes every transition from the list of observations.
TEST_CASE("alerts: incremental equals batch equals a naive reference on random runs") {
  for (const uint32_t seed : {1u, 7u, 42u, 2024u, 99991u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    auto uniform = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
    const std::span<const AlertMetricInfo> metrics = kAlertMetrics;
    std::vector<AlertRule> rules;
    const int rule_count = uniform(1, 5);
    for (int i = 0; i < rule_count; ++i) {
      const auto cmp = static_cast<AlertComparison>(uniform(0, 3));
      const WindowSpec w =
          uniform(0, 1) ? WindowSpec::Steps(uniform(1, 50)) : WindowSpec::Duration(uniform(1, 30) * kSecond);
      AlertRule r = Rule("rule" + std::to_string(i), std::string(metrics[i].name), cmp, uniform(-2, 2) * 10.0, w,
                         uniform(1, 4), uniform(1, 4));
      r.summary = uniform(0, 1) ? "" : "{value} vs {threshold} over {window}";
      rules.push_back(r);
    }
    // The run: per evaluation, the step and each rule's value (NaN = missing).
    const int n = uniform(50, 400);
    std::vector<int64_t> steps(n);
    std::vector<std::vector<double>> values(n, std::vector<double>(rules.size()));
    int64_t step = uniform(0, 1000);
    for (int t = 0; t < n; ++t) {
      step += uniform(0, 3) == 0 ? 0 : 1;  // sometimes no new step.
      steps[t] = step;
      for (size_t r = 0; r < rules.size(); ++r) {
        const int pick = uniform(0, 6);
        values[t][r] = pick == 0 ? std::numeric_limits<double>::quiet_NaN()
                                 : rules[r].threshold + (pick % 3) - 1;  // −1, 0, +1 around it.
      }
    }
    auto source_at = [&](int t) {
      FakeSource src;
      for (size_t r = 0; r < rules.size(); ++r) {
        if (!std::isnan(values[t][r])) {
          src.Set(rules[r].metric, rules[r].window, values[t][r], steps[t] - 3, steps[t]);
        }
      }
      return src;
    };
    auto now_at = [&](int t) { return kT0 + static_cast<uint64_t>(t) * kTick; };

    // (1) Batch.
    AlertEngine batch(rules);
    std::vector<AlertEvent> batch_events;
    for (int t = 0; t < n; ++t) {
      for (AlertEvent& e : batch.Evaluate(source_at(t), now_at(t), steps[t])) {
        batch_events.push_back(std::move(e));
      }
    }
    // (2) Chunks.
    AlertEngine chunked(rules);
    std::vector<AlertEvent> chunked_events;
    for (int t = 0; t < n;) {
      const int end = std::min(n, t + uniform(1, 40));
      for (; t < end; ++t) {
        for (AlertEvent& e : chunked.Evaluate(source_at(t), now_at(t), steps[t])) {
          chunked_events.push_back(std::move(e));
        }
      }
      (void)chunked.Snapshot();
      chunked.SetRules(rules);
    }
    CHECK_FALSE(batch_events.empty());  // the run did exercise transitions.
    CHECK(chunked_events == batch_events);
    CHECK(chunked.Snapshot() == batch.Snapshot());

    // (3) Naive reference, rule by rule.
    struct RefEvent {
      int t;
      size_t rule;
      bool firing;
      double value;
    };
    std::vector<RefEvent> ref_events;
    const AlertsSnapshot snap = batch.Snapshot();
    for (size_t r = 0; r < rules.size(); ++r) {
      const AlertRule& rule = rules[r];
      const bool per_step = rule.window.kind == WindowSpec::Kind::kSteps;
      struct Obs {
        int t;
        bool breach;
        double value;
      };
      std::vector<Obs> obs;
      uint64_t missing = 0;
      std::optional<int64_t> last_present_step;
      for (int t = 0; t < n; ++t) {
        if (per_step && last_present_step == steps[t]) continue;
        const double v = values[t][r];
        if (std::isnan(v)) {
          ++missing;
          continue;
        }
        last_present_step = steps[t];
        bool breach = false;
        switch (rule.comparison) {
          case AlertComparison::kGreaterEqual: breach = v >= rule.threshold; break;
          case AlertComparison::kGreater: breach = v > rule.threshold; break;
          case AlertComparison::kLessEqual: breach = v <= rule.threshold; break;
          case AlertComparison::kLess: breach = v < rule.threshold; break;
        }
        obs.push_back({t, breach, v});
      }
      // True when the `len` observations ending at j all equal `breach`.
      auto run = [&](size_t j, uint32_t len, bool breach) {
        if (j + 1 < len) return false;
        for (size_t i = j + 1 - len; i <= j; ++i) {
          if (obs[i].breach != breach) return false;
        }
        return true;
      };
      bool firing = false;
      AlertState state = AlertState::kOk;
      uint64_t since = 0;
      for (size_t j = 0; j < obs.size(); ++j) {
        if (!firing && run(j, rule.fire_after, true)) {
          firing = true;
          ref_events.push_back({obs[j].t, r, true, obs[j].value});
        } else if (firing && run(j, rule.resolve_after, false)) {
          firing = false;
          ref_events.push_back({obs[j].t, r, false, obs[j].value});
        }
        const AlertState now_state = firing ? (obs[j].breach ? AlertState::kFiring : AlertState::kResolving)
                                            : (obs[j].breach ? AlertState::kPending : AlertState::kOk);
        if (now_state != state) since = now_at(obs[j].t);
        state = now_state;
      }
      // The trailing runs give the counts.
      uint32_t trailing_breach = 0;
      uint32_t trailing_clear = 0;
      for (size_t j = obs.size(); j-- > 0 && obs[j].breach;) ++trailing_breach;
      for (size_t j = obs.size(); j-- > 0 && !obs[j].breach;) ++trailing_clear;
      const AlertRuleStatus& st = snap.rules[r];
      CAPTURE(rule.name);
      CHECK(st.state == state);
      CHECK(st.since_ns == since);
      CHECK(st.breaching_count == trailing_breach);
      CHECK(st.clear_count == (firing ? trailing_clear : 0u));
      CHECK(st.evaluations == obs.size());
      CHECK(st.missing == missing);
      if (!obs.empty()) {
        CHECK(st.value == obs.back().value);
        CHECK(st.last_step == steps[obs.back().t]);
        CHECK(st.evaluated_ns == now_at(obs.back().t));
      }
    }
    std::stable_sort(ref_events.begin(), ref_events.end(),
                     [](const RefEvent& a, const RefEvent& b) { return a.t < b.t; });
    REQUIRE(batch_events.size() == ref_events.size());
    for (size_t i = 0; i < ref_events.size(); ++i) {
      const RefEvent& want = ref_events[i];
      const AlertEvent& got = batch_events[i];
      CHECK(got.rule == rules[want.rule].name);
      CHECK((got.state == AlertEventState::kFiring) == want.firing);
      CHECK(got.value == want.value);
      CHECK(got.ts_ns == now_at(want.t));
      CHECK(got.last_step == steps[want.t]);
      CHECK(got.summary == (want.firing ? RenderAlertSummary(rules[want.rule], want.value)
                                        : RenderResolvedSummary(rules[want.rule], want.value)));
    }
  }
}

TEST_CASE("alerts: what fires shows its value now, and at the end of a job it is closed with its last value") {
  const WindowSpec w = WindowSpec::Steps(20);
  AlertEngine engine({Rule("input_high", "input_pct", AlertComparison::kGreaterEqual, 20, w),
                      Rule("input_pending", "input_pct", AlertComparison::kGreaterEqual, 20, w, /*fire_after=*/5)});
  FakeSource src;
  src.Set("input_pct", w, 16.61);
  engine.Evaluate(src, kT0, kStep0);
  src.Set("input_pct", w, 25.5);
  REQUIRE(engine.Evaluate(src, kT0 + kTick, kStep0 + 1).size() == 1);  // input_high fires at 25.5.
  src.Set("input_pct", w, 66.59);
  engine.Evaluate(src, kT0 + 2 * kTick, kStep0 + 2);

  // The event keeps the value it fired with; the banner's value is now's.
  AlertsSnapshot s = engine.Snapshot();
  REQUIRE(s.firing.size() == 1);
  CHECK(s.firing[0].value == 25.5);
  REQUIRE(s.firing[0].value_now.has_value());
  CHECK(*s.firing[0].value_now == 66.59);
  CHECK(s.firing[0].summary_now.find("66.59") != std::string::npos);
  JsonWriter jw;
  s.WriteJson(jw);
  nlohmann::json j = nlohmann::json::parse(jw.Take());
  CHECK(j["firing"][0]["value"] == 25.5);
  CHECK(j["firing"][0]["value_now"] == 66.59);
  CHECK(j["history"][0].count("value_now") == 0);  // only what fires now has it.
  CHECK(StateOf(engine, "input_pending") == AlertState::kPending);

  // The job ends: closed, "at end of job", with the last value.
  const uint64_t end_ns = kT0 + 3 * kTick;
  const std::vector<AlertEvent> closed = engine.CloseAll(end_ns, "at end of job");
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].rule == "input_high");
  CHECK(closed[0].state == AlertEventState::kClosed);
  CHECK(closed[0].value == 66.59);
  CHECK(closed[0].ts_ns == end_ns);
  CHECK(closed[0].summary == "input_high closed at end of job: last input_pct 66.59% (>= 20% over the last 20 steps)");
  s = engine.Snapshot();
  CHECK(s.firing.empty());
  CHECK(StatusOf(s, "input_high").state == AlertState::kClosed);
  CHECK(*StatusOf(s, "input_high").value == 66.59);
  CHECK(StatusOf(s, "input_pending").state == AlertState::kOk);  // pending never fired: nothing to close.
  CHECK(s.history.back() == closed[0]);
  CHECK(s.last_evaluated_ns == end_ns);  // the page's clock is not behind its newest event.
  JsonWriter jw2;
  s.WriteJson(jw2);
  j = nlohmann::json::parse(jw2.Take());
  CHECK(j["rules"][0]["state"] == "closed");
  CHECK(j["history"].back()["state"] == "closed");
  CHECK(s.ToCsv().find(",closed,66.59,") != std::string::npos);
  CHECK(engine.CloseAll(end_ns + kTick, "at end of job").empty());  // closed once.

  // A job again: a closed rule starts from ok, and fires anew.
  const std::vector<AlertEvent> again = engine.Evaluate(src, end_ns + kTick, kStep0 + 3);
  REQUIRE(again.size() == 1);
  CHECK(again[0].state == AlertEventState::kFiring);
  CHECK(StateOf(engine, "input_high") == AlertState::kFiring);
}

}  // namespace liveprof::alerts_test
