// Alerts: rules over rolling-window metrics, with hysteresis. A rule compares
// one metric of a window (the last N steps, or the last T seconds) with a
// threshold; it fires after `fire_after` consecutive breaching evaluations and
// resolves after `resolve_after` consecutive clear ones. A rule with a
// `baseline` window compares the recent window with that earlier window
// instead (value = +X % over the baseline: step-time regression).
//
// The pipeline owns the numbers: it implements MetricSource over its rolling
// windows; this unit only holds rules and their states. Rules come built in
// (DefaultAlertRules(), the same as deploy/alerts/default_rules.json) or from a
// rules file (ParseAlertRules; format and metric definitions in docs/alerts.md).
//
// Pure: Evaluate() and Snapshot(), no I/O, no locks, no threads, never throws.
#ifndef LIVEPROF_AGGREGATORS_ALERTS_ALERTS_H_
#define LIVEPROF_AGGREGATORS_ALERTS_ALERTS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace liveprof {

class JsonWriter;

// Which stretch of the run a metric covers.
struct WindowSpec {
  enum class Kind : uint8_t { kSteps, kSeconds };
  Kind kind = Kind::kSteps;
  uint32_t steps = 0;  // kSteps: this many completed steps.
  uint64_t ns = 0;     // kSeconds: the last `ns` nanoseconds before now.
  // kSteps only: leave out the `offset_steps` most recent completed steps, so
  // {steps 100, offset_steps 20} is "the 100 steps before the last 20".
  uint32_t offset_steps = 0;

  static WindowSpec Steps(uint32_t n, uint32_t offset = 0) { return {Kind::kSteps, n, 0, offset}; }
  static WindowSpec Duration(uint64_t window_ns) { return {Kind::kSeconds, 0, window_ns, 0}; }
  bool operator==(const WindowSpec&) const = default;
};

// One metric over one window, as the pipeline computed it.
struct MetricValue {
  double value = 0;
  int64_t first_step = -1;  // steps the window covers; -1 when it holds none.
  int64_t last_step = -1;
  uint64_t samples = 0;  // steps (or time buckets) that went into `value`.
  // The worker the value is about (pod metrics: "rank 2"); "" for the others.
  std::string worker = {};
  // How much the window's samples scatter, in percent of the value: for the
  // step-time metrics 1.4826 × their median absolute deviation over their
  // median (robust: a few slow steps do not move it); nullopt for the others. A
  // baseline that scatters more than a regression rule's threshold is no
  // baseline: the rule has no value then (see AlertRule::baseline).
  std::optional<double> spread_pct = std::nullopt;
};

// What the alert engine reads. The pipeline implements it over its windows;
// the metric names and their meaning are listed in docs/alerts.md.
class MetricSource {
 public:
  virtual ~MetricSource() = default;
  // `metric` over `w`; nullopt when it is unknown or has no data in `w`.
  virtual std::optional<MetricValue> Get(std::string_view metric, const WindowSpec& w) const = 0;
  // The step clock of a metric whose steps are not the pipeline's own (the
  // pod's: any worker's step moves it). A rule with a steps window on such a
  // metric advances once per value of this clock instead of `current_step`.
  // nullopt: `current_step`.
  virtual std::optional<int64_t> StepClock(std::string_view /*metric*/) const { return std::nullopt; }
};

enum class AlertComparison : uint8_t { kGreaterEqual, kGreater, kLessEqual, kLess };
enum class AlertSeverity : uint8_t { kCritical, kWarning, kInfo };
// kPending: breaching, fewer than fire_after times in a row. kResolving:
// firing, clear fewer than resolve_after times in a row (still firing).
// kClosed: it was firing when the job ended (AlertEngine::CloseAll): no
// longer firing, never seen to clear; the next evaluation (a job again)
// takes it as ok.
enum class AlertState : uint8_t { kOk, kPending, kFiring, kResolving, kClosed };
// kClosed: a firing alert closed at the end of the job, with its last value.
enum class AlertEventState : uint8_t { kFiring, kResolved, kClosed };

std::string_view AlertComparisonText(AlertComparison c);  // ">=", ">", "<=", "<"
std::string_view AlertSeverityName(AlertSeverity s);      // "critical", "warning", "info"
std::string_view AlertStateName(AlertState s);            // "ok", "pending", "firing", "resolving", "closed"
std::string_view AlertEventStateName(AlertEventState s);  // "firing", "resolved", "closed"
// The unit of a rule's value: "%" for a baseline rule (a change), else its
// metric's (alert_metrics.h); "" for a metric the table does not know.
std::string_view AlertValueUnit(std::string_view metric, bool baseline);

struct AlertRule {
  std::string name;    // unique; [A-Za-z0-9_.:-], at most 128 bytes.
  std::string metric;  // one of kAlertMetrics' names (alert_metrics.h).
  AlertComparison comparison = AlertComparison::kGreaterEqual;
  double threshold = 0;
  WindowSpec window;
  // Regression rules: value = 100 × (metric(window) / metric(baseline) − 1),
  // the recent window's excess over the baseline in percent. Measured only
  // on a stable baseline: when the baseline's samples scatter (spread_pct)
  // more than `threshold`, a change of `threshold` is noise, and the rule
  // has no value (counted missing; its state is kept).
  std::optional<WindowSpec> baseline;
  uint32_t fire_after = 1;     // consecutive breaching evaluations to fire (0 acts as 1).
  uint32_t resolve_after = 1;  // consecutive clear evaluations to resolve (0 acts as 1).
  AlertSeverity severity = AlertSeverity::kWarning;
  // Text with {value}, {threshold}, {window} and {worker} placeholders; "" =
  // a generic text.
  std::string summary;

  bool operator==(const AlertRule&) const = default;
};

// A rule started or stopped firing.
struct AlertEvent {
  std::string rule;
  std::string metric;
  AlertSeverity severity = AlertSeverity::kWarning;
  AlertEventState state = AlertEventState::kFiring;
  double value = 0;  // the value of the evaluation that made the transition.
  double threshold = 0;
  AlertComparison comparison = AlertComparison::kGreaterEqual;
  std::string window_text;  // "last 20 steps", "last 10 s", "last 20 steps vs the 100 steps before"
  WindowSpec window;
  std::optional<WindowSpec> baseline;
  int64_t first_step = -1;  // the steps of the recent window (-1: none).
  int64_t last_step = -1;
  uint64_t ts_ns = 0;  // the `now_ns` of the evaluation.
  std::string worker;  // the worker it is about (MetricValue::worker); "" for most.
  // Firing: the rule's template, rendered. Resolved: what cleared, with the
  // value and threshold in their unit ("input_pct 2.56 % < 20 % over the
  // last 20 steps"), never the firing text. Closed: "<rule> closed at end of
  // job: last <metric> <value> ..." (RenderClosedSummary).
  std::string summary;
  // Only in AlertsSnapshot::firing: the rule's value at its last evaluation
  // and the summary rendered with it (what a banner shows now); `value` and
  // `summary` stay those of the moment it fired.
  std::optional<double> value_now = std::nullopt;
  std::string summary_now = {};

  void WriteJson(JsonWriter& w) const;
  bool operator==(const AlertEvent&) const = default;
};

// One rule and where its state machine stands.
struct AlertRuleStatus {
  AlertRule rule;
  AlertState state = AlertState::kOk;
  uint32_t breaching_count = 0;  // consecutive breaching evaluations (ok/pending/firing).
  uint32_t clear_count = 0;      // consecutive clear evaluations while firing/resolving.
  std::optional<double> value;   // the last evaluated value; nullopt before any.
  int64_t first_step = -1;       // the steps of that evaluation's window.
  int64_t last_step = -1;
  uint64_t evaluated_ns = 0;  // when the state last advanced (0: never).
  uint64_t since_ns = 0;      // when the rule entered `state` (0: never left ok).
  uint64_t evaluations = 0;   // evaluations that had a value.
  uint64_t missing = 0;       // evaluations whose metric was missing (state kept).

  bool operator==(const AlertRuleStatus&) const = default;
};

struct AlertsSnapshot {
  std::vector<AlertRuleStatus> rules;  // in rule order.
  // The event that started each alert still firing (state firing or
  // resolving), with value_now / summary_now filled in.
  std::vector<AlertEvent> firing;
  std::vector<AlertEvent> history;  // the newest events (at most max_history), oldest first.
  uint64_t history_dropped = 0;     // older events dropped from `history`.
  uint64_t evaluations = 0;         // Evaluate() calls.
  uint64_t last_evaluated_ns = 0;   // (or of CloseAll, when that came later)
  int64_t last_evaluated_step = -1;

  // One JSON object: {"rules":[...],"firing":[...],"history":[...],
  // "history_dropped":N,"evaluations":N,"last_evaluated_ns":N,"last_evaluated_step":N}.
  void WriteJson(JsonWriter& w) const;
  // The history as CSV, one event per row, with a header row.
  std::string ToCsv() const;
  bool operator==(const AlertsSnapshot&) const = default;
};

struct AlertEngineOptions {
  size_t max_history = 1000;  // AlertEvents kept for the snapshot.
};

class AlertEngine {
 public:
  // Rules as given (ParseAlertRules has validated a file's; programmatic rules
  // are taken as they are). Pipeline thread.
  explicit AlertEngine(std::vector<AlertRule> rules, AlertEngineOptions options = {});

  // Replaces the rules. A rule whose name survives with the same metric,
  // comparison and kind (with or without baseline) keeps its state under its
  // new parameters; every other rule starts at ok. A firing (or resolving) rule
  // that was removed or reset gets a resolved event: it enters the history now
  // and is returned first by the next Evaluate(). Pipeline thread.
  void SetRules(std::vector<AlertRule> rules);

  // Evaluates every rule against `source` at time `now_ns`, the pipeline's
  // current step being `current_step`; returns the transitions, in rule order
  // (after any left by SetRules). A rule whose metric is missing keeps its
  // state and counts. A rule with a step window advances at most once per
  // `current_step` value: with no new step, its evaluation is skipped. Pipeline
  // thread.
  std::vector<AlertEvent> Evaluate(const MetricSource& source, uint64_t now_ns, int64_t current_step);

  // The end of the job (finished or cut off): every alert still firing (or
  // resolving) is closed with its last value, state kClosed, and gets a
  // closed event whose summary says `why` ("at end of job"); pending rules
  // go back to ok. Returns those events (also in the history), in rule
  // order. The caller stops evaluating until a job is live again; the next
  // Evaluate() takes a closed rule as ok. Pipeline thread.
  std::vector<AlertEvent> CloseAll(uint64_t now_ns, std::string_view why);

  // The rules, what is firing and the history. A plain value any thread may read.
  // `max_history`: at most the newest that many history events (the rest
  // count in history_dropped).
  AlertsSnapshot Snapshot(size_t max_history = SIZE_MAX) const;

 private:
  struct RuleState {
    AlertRuleStatus status;
    std::optional<int64_t> evaluated_step;  // step windows: the step last evaluated.
    std::optional<AlertEvent> firing_event;
  };

  void Record(AlertEvent event, std::vector<AlertEvent>* out);
  void ResolveDropped(const RuleState& r, std::string_view why);

  AlertEngineOptions options_;
  std::vector<RuleState> rules_;
  std::deque<AlertEvent> history_;
  uint64_t history_dropped_ = 0;
  std::vector<AlertEvent> queued_;  // resolved by SetRules, returned by the next Evaluate.
  uint64_t evaluations_ = 0;
  uint64_t last_now_ns_ = 0;
  int64_t last_step_ = -1;
};

// The built-in rules; deploy/alerts/default_rules.json holds the same ones.
std::vector<AlertRule> DefaultAlertRules();

// Parses a rules file ({"version":1,"rules":[...]}, docs/alerts.md). On success
// replaces *out and returns true. On failure leaves *out as it was, returns
// false and puts in *error (may be null) every problem found, one per line,
// each naming what and where: "invalid JSON at byte 13 (line 1, column 14): ...",
// "rules[2] 'input_bound_high': 'threshold' must be a number". Unknown fields,
// unknown metrics and duplicate rule names are errors. Any thread.
bool ParseAlertRules(std::string_view json, std::vector<AlertRule>* out, std::string* error);

// One rule's own fields as in a rules file, written into the object the
// caller has open (shared by the rules file and the snapshot's JSON).
void WriteAlertRuleFields(JsonWriter& w, const AlertRule& rule);

// `rules` in the rules-file format, compact. ParseAlertRules reads it back
// equal for any rules it accepts.
std::string AlertRulesToJson(std::span<const AlertRule> rules);

// The rule's summary with {value}, {threshold}, {window} and {worker} filled
// in; numbers with at most two decimals. An empty template gives a generic
// text (naming the worker when there is one).
std::string RenderAlertSummary(const AlertRule& rule, double value, std::string_view worker = {});
// A resolved event's text: "<rule> resolved: <metric> [of <worker>] <value><unit>
// <opposite comparison> <threshold><unit> over the <window>".
std::string RenderResolvedSummary(const AlertRule& rule, double value, std::string_view worker = {});
// A closed event's text: "<rule> closed <why>: last <metric> [of <worker>]
// <value><unit> (<comparison> <threshold><unit> over the <window>)".
std::string RenderClosedSummary(const AlertRule& rule, double value, std::string_view why,
                                std::string_view worker = {});

// "last 20 steps", "last 10 s", "last 20 steps vs the 100 steps before".
std::string AlertWindowText(const WindowSpec& window, const std::optional<WindowSpec>& baseline);

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_ALERTS_ALERTS_H_
