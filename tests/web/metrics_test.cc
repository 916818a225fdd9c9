// The /metrics renderer: the exact text for a hand-built input, label
// escaping, the step-time percentiles, and end to end: the simulated
// input-bound workload through Analyses and a real Stream, collected,
// rendered, and checked by Debian's `promtool check metrics`.
#include "web/metrics.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "aggregators/analyses.h"
#include "doctest/doctest.h"
#include "producers/simulated_model.h"
#include "simulated_run.h"
#include "stream/reorder_buffer.h"
#include "stream/stream.h"

namespace liveprof::metrics_test {
namespace {

constexpr const char* kPromtool = "/usr/bin/promtool";

// Runs `command` through the shell; returns its exit status and, in *output,
// what it printed on stdout and stderr.
int RunCommand(const std::string& command, std::string* output) {
  output->clear();
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Checks `text` with `promtool check metrics`: exit 0 and no lint problem.
void CheckWithPromtool(const std::string& text, const char* tag) {
  REQUIRE_MESSAGE(access(kPromtool, X_OK) == 0,
                  "/usr/bin/promtool missing: run scripts/setup.sh (Debian package prometheus)");
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("liveprof_metrics_" + std::to_string(getpid()) + "_" + tag + ".prom");
  {
    std::ofstream f(path, std::ios::binary);
    f << text;
  }
  std::string output;
  const int status = RunCommand(std::string(kPromtool) + " check metrics < '" + path.string() + "'", &output);
  INFO("promtool said: " << output);
  INFO("input:\n" << text);
  CHECK(status == 0);
  CHECK(output.empty());
  std::filesystem::remove(path);
}

// Every line of `text` that starts with `prefix`.
std::vector<std::string> LinesStartingWith(const std::string& text, std::string_view prefix) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    if (line.starts_with(prefix)) out.emplace_back(line);
    pos = end + 1;
  }
  return out;
}

// `line` occurs in `text` exactly once, as a whole line.
bool HasLine(const std::string& text, std::string_view line) {
  return std::ranges::count(LinesStartingWith(text, line), std::string(line)) == 1;
}

MetricsInput HandBuilt() {
  MetricsInput in;
  in.version = "1.2.3";
  in.window.steps = 20;
  in.step_time = {.p50 = 0.1, .p90 = 0.125, .p99 = 0.5};
  in.bucket_ratio[static_cast<size_t>(Bucket::kDeviceCompute)] = 0.5;
  in.bucket_ratio[static_cast<size_t>(Bucket::kInput)] = 0.25;
  in.bucket_ratio[static_cast<size_t>(Bucket::kAllOthers)] = 0.25;
  in.input_ratio = 0.25;
  in.input_bound = InputBound::kHighly;
  in.steps_closed = 42;
  in.events_consumed = 1000;
  in.late_events = 3;
  in.events_published = 1200;
  in.events_dropped = 7;
  in.pipeline_backlog_events = 4096;
  // Two rings of one name: one series, summed.
  in.sources = {{"thread 2", 700, 0}, {"cupti", 400, 5}, {"thread 2", 100, 2}};
  in.alerts = {{"input_bound_high", AlertSeverity::kCritical, true},
               {"kernel_launch_bound", AlertSeverity::kWarning, false}};
  // An ingest source that sent events on a track it never defined (as a real GPU's sender did).
  in.ingest_refused = {{"ingest rank 0", "undefined_track", 200}, {"ingest rank 1", "bad_kind", 1}};
  return in;
}

constexpr std::string_view kHandBuiltText =
    R"(# HELP liveprof_build_info liveprof's version; always 1.
# TYPE liveprof_build_info gauge
liveprof_build_info{version="1.2.3"} 1
# HELP liveprof_events_consumed_total Events the analyses consumed.
# TYPE liveprof_events_consumed_total counter
liveprof_events_consumed_total 1000
# HELP liveprof_events_published_total Events the producers wrote into their rings, every ring since the start.
# TYPE liveprof_events_published_total counter
liveprof_events_published_total 1200
# HELP liveprof_events_dropped_total Events lost before analysis: full rings, records the source dropped, threads with no ring.
# TYPE liveprof_events_dropped_total counter
liveprof_events_dropped_total 7
# HELP liveprof_pipeline_backlog_events Events drained from the rings and queued for the analyses: a growing backlog is a pipeline slower than its producers (at 2 Mi the rings drop).
# TYPE liveprof_pipeline_backlog_events gauge
liveprof_pipeline_backlog_events 4096
# HELP liveprof_source_events_published_total Events written per producer ring (live rings, by ring name).
# TYPE liveprof_source_events_published_total counter
liveprof_source_events_published_total{source="cupti"} 400
liveprof_source_events_published_total{source="thread 2"} 800
# HELP liveprof_source_events_dropped_total Events dropped per producer ring (live rings, by ring name).
# TYPE liveprof_source_events_dropped_total counter
liveprof_source_events_dropped_total{source="cupti"} 5
liveprof_source_events_dropped_total{source="thread 2"} 2
# HELP liveprof_ingest_refused_events_total Events an ingest source sent that the server refused alone (the rest of their batch was taken), by source ring and reason.
# TYPE liveprof_ingest_refused_events_total counter
liveprof_ingest_refused_events_total{source="ingest rank 0",reason="undefined_track"} 200
liveprof_ingest_refused_events_total{source="ingest rank 1",reason="bad_kind"} 1
# HELP liveprof_late_events_total Events that arrived after the reorder window had passed their time.
# TYPE liveprof_late_events_total counter
liveprof_late_events_total 3
# HELP liveprof_steps_closed_total Training steps completed.
# TYPE liveprof_steps_closed_total counter
liveprof_steps_closed_total 42
# HELP liveprof_window_steps Steps in the window the step gauges describe (the last 20 steps).
# TYPE liveprof_window_steps gauge
liveprof_window_steps 20
# HELP liveprof_step_time_seconds Step time at a percentile (nearest rank) over the last 20 steps.
# TYPE liveprof_step_time_seconds gauge
liveprof_step_time_seconds{percentile="50"} 0.1
liveprof_step_time_seconds{percentile="90"} 0.125
liveprof_step_time_seconds{percentile="99"} 0.5
# HELP liveprof_step_time_ratio Share of the step time in each step-time breakdown category over the last 20 steps (ratio of sums).
# TYPE liveprof_step_time_ratio gauge
liveprof_step_time_ratio{category="device_compute"} 0.5
liveprof_step_time_ratio{category="device_to_device"} 0
liveprof_step_time_ratio{category="device_collectives"} 0
liveprof_step_time_ratio{category="host_compute"} 0
liveprof_step_time_ratio{category="kernel_launch"} 0
liveprof_step_time_ratio{category="input"} 0.25
liveprof_step_time_ratio{category="output"} 0
liveprof_step_time_ratio{category="compilation"} 0
liveprof_step_time_ratio{category="all_others"} 0.25
# HELP liveprof_input_ratio Share of the step time spent waiting for input over the last 20 steps (ratio of sums); 0.20 and up is HIGHLY, 0.05 and up MODERATELY input-bound.
# TYPE liveprof_input_ratio gauge
liveprof_input_ratio 0.25
# HELP liveprof_input_bound The input pipeline classification of the last 20 steps: 1 for the current one.
# TYPE liveprof_input_bound gauge
liveprof_input_bound{classification="highly"} 1
liveprof_input_bound{classification="moderately"} 0
liveprof_input_bound{classification="potentially"} 0
liveprof_input_bound{classification="not"} 0
liveprof_input_bound{classification="unknown"} 0
# HELP liveprof_alert_firing liveprof's own alert rules: 1 while the rule is firing, else 0.
# TYPE liveprof_alert_firing gauge
liveprof_alert_firing{rule="input_bound_high",severity="critical"} 1
liveprof_alert_firing{rule="kernel_launch_bound",severity="warning"} 0
)";

TEST_CASE("metrics: a hand-built input renders exactly these lines") {
  const std::string text = RenderPrometheus(HandBuilt());
  CHECK(text == kHandBuiltText);
  CheckWithPromtool(text, "hand_built");
}

TEST_CASE("metrics: an empty window leaves out the window's families") {
  MetricsInput in;
  in.version = "0.1.0";
  const std::string text = RenderPrometheus(in);
  CHECK(LinesStartingWith(text, "liveprof_step_time").empty());
  CHECK(LinesStartingWith(text, "liveprof_input_ratio").empty());
  CHECK(LinesStartingWith(text, "liveprof_window_steps").empty());
  CHECK(LinesStartingWith(text, "liveprof_source_").empty());
  CHECK(LinesStartingWith(text, "liveprof_alert_firing").empty());
  CHECK(LinesStartingWith(text, "liveprof_ingest_refused").empty());  // no ingest, or nothing refused.
  CHECK(HasLine(text, "liveprof_steps_closed_total 0"));
  CHECK(HasLine(text, "liveprof_input_bound{classification=\"unknown\"} 1"));
  CHECK(HasLine(text, "liveprof_input_bound{classification=\"highly\"} 0"));
  CheckWithPromtool(text, "empty");
}

TEST_CASE("metrics: liveprof's own threads' CPU by name, and the server's memory") {
  MetricsInput in;
  in.version = "0.1.0";
  CHECK(LinesStartingWith(RenderPrometheus(in), "liveprof_self_").empty());  // before the first sample.
  in.self_threads = {{11, "liveprof pipe", 1'500'000'000},
                     {12, "liveprof web", 250'000'000},
                     {13, "liveprof web", 250'000'000},
                     {14, "liveprof drain", 10'000'000}};
  in.self_rss_bytes = 64u << 20;
  const std::string text = RenderPrometheus(in);
  CHECK(LinesStartingWith(text, "liveprof_self_cpu_seconds_total{") ==
        std::vector<std::string>{"liveprof_self_cpu_seconds_total{thread=\"liveprof drain\"} 0.01",
                                 "liveprof_self_cpu_seconds_total{thread=\"liveprof pipe\"} 1.5",
                                 "liveprof_self_cpu_seconds_total{thread=\"liveprof web\"} 0.5"});
  CHECK(HasLine(text, "liveprof_self_resident_bytes 67108864"));
  CheckWithPromtool(text, "self_cost");
}

TEST_CASE("metrics: liveprof's own cost in each ingest source's process, by source and thread, and its hooks' time") {
  MetricsInput in;
  in.version = "0.1.0";
  CHECK(LinesStartingWith(RenderPrometheus(in), "liveprof_source_self_").empty());  // no source said one.
  in.ingest_cost = {{"ingest rank 0",
                     {{21, "liveprof send", 2'000'000'000}, {22, "liveprof-cupti", 500'000'000}},
                     3u << 30,
                     1'250'000'000,
                     23'783'706},
                    {"ingest rank 1", {{31, "liveprof send", 250'000'000}}, 1u << 30, 0}};
  const std::string text = RenderPrometheus(in);
  CHECK(LinesStartingWith(text, "liveprof_source_self_cpu_seconds_total{") ==
        std::vector<std::string>{
            "liveprof_source_self_cpu_seconds_total{source=\"ingest rank 0\",thread=\"liveprof send\"} 2",
            "liveprof_source_self_cpu_seconds_total{source=\"ingest rank 0\",thread=\"liveprof-cupti\"} 0.5",
            "liveprof_source_self_cpu_seconds_total{source=\"ingest rank 1\",thread=\"liveprof send\"} 0.25"});
  CHECK(LinesStartingWith(text, "liveprof_source_resident_bytes{") ==
        std::vector<std::string>{"liveprof_source_resident_bytes{source=\"ingest rank 0\"} 3221225472",
                                 "liveprof_source_resident_bytes{source=\"ingest rank 1\"} 1073741824"});
  // The time liveprof's hooks in each program measured (0: none, a program without them).
  CHECK(LinesStartingWith(text, "liveprof_source_hook_seconds_total") ==
        std::vector<std::string>{"liveprof_source_hook_seconds_total{source=\"ingest rank 0\"} 1.25",
                                 "liveprof_source_hook_seconds_total{source=\"ingest rank 1\"} 0"});
  CHECK(text.find("# TYPE liveprof_source_hook_seconds_total counter\n") != std::string::npos);
  // CUPTI's own time in each (0: no CUPTI, or none recorded).
  CHECK(LinesStartingWith(text, "liveprof_source_cupti_overhead_seconds_total") ==
        std::vector<std::string>{"liveprof_source_cupti_overhead_seconds_total{source=\"ingest rank 0\"} 0.023783706",
                                 "liveprof_source_cupti_overhead_seconds_total{source=\"ingest rank 1\"} 0"});
  CheckWithPromtool(text, "source_cost");
}

TEST_CASE("metrics: label values are escaped") {
  CHECK(EscapeLabelValue("plain") == "plain");
  CHECK(EscapeLabelValue(R"(a\b)") == R"(a\\b)");
  CHECK(EscapeLabelValue(R"(say "hi")") == R"(say \"hi\")");
  CHECK(EscapeLabelValue("two\nlines") == R"(two\nlines)");
  CHECK(EscapeLabelValue("tab\tstays") == "tab\tstays");

  MetricsInput in;
  in.version = "v\"1\"\\x\ny";
  in.sources = {{"ring \"a\"\\b\nc", 3, 1}};
  in.ingest_refused = {{"ingest host \"x\":1", "undefined_name", 4}};
  const std::string text = RenderPrometheus(in);
  CHECK(
      HasLine(text, R"(liveprof_ingest_refused_events_total{source="ingest host \"x\":1",reason="undefined_name"} 4)"));
  CHECK(HasLine(text, R"(liveprof_build_info{version="v\"1\"\\x\ny"} 1)"));
  CHECK(HasLine(text, R"(liveprof_source_events_published_total{source="ring \"a\"\\b\nc"} 3)"));
  CHECK(HasLine(text, R"(liveprof_source_events_dropped_total{source="ring \"a\"\\b\nc"} 1)"));
  CheckWithPromtool(text, "escaped");
}

TEST_CASE("metrics: sample values") {
  CHECK(FormatSampleValue(0) == "0");
  CHECK(FormatSampleValue(20) == "20");
  CHECK(FormatSampleValue(0.1) == "0.1");
  CHECK(FormatSampleValue(1.0 / 3) == "0.3333333333333333");
  CHECK(FormatSampleValue(1e-9) == "1e-09");
  CHECK(FormatSampleValue(-2.5) == "-2.5");
  CHECK(FormatSampleValue(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(FormatSampleValue(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(FormatSampleValue(-std::numeric_limits<double>::infinity()) == "-Inf");
}

TEST_CASE("metrics: step-time percentiles are nearest-rank") {
  constexpr uint64_t kMs = 1'000'000;
  auto rows_of = [](std::vector<uint64_t> durations_ms) {
    std::vector<StepBreakdownRow> rows;
    uint64_t t = 1'000 * kMs;
    for (uint64_t d : durations_ms) {
      StepBreakdownRow r;
      r.begin_ns = t;
      r.end_ns = t + d * kMs;
      t = r.end_ns;
      rows.push_back(r);
    }
    return rows;
  };
  SUBCASE("no rows") {
    const StepTimeQuantiles q = ComputeStepTimeQuantiles({});
    CHECK(q.p50 == 0);
    CHECK(q.p90 == 0);
    CHECK(q.p99 == 0);
  }
  SUBCASE("one row") {
    const StepTimeQuantiles q = ComputeStepTimeQuantiles(rows_of({250}));
    CHECK(q.p50 == 0.25);
    CHECK(q.p90 == 0.25);
    CHECK(q.p99 == 0.25);
  }
  SUBCASE("20 rows 1..20 ms, shuffled: the 10th, 18th and 20th") {
    std::vector<uint64_t> d;
    for (uint64_t i = 1; i <= 20; ++i) d.push_back((i * 7) % 20 + 1);  // a permutation of 1..20.
    const StepTimeQuantiles q = ComputeStepTimeQuantiles(rows_of(d));
    CHECK(q.p50 == 0.010);
    CHECK(q.p90 == 0.018);
    CHECK(q.p99 == 0.020);
  }
  SUBCASE("4 rows: ceil(2), ceil(3.6), ceil(3.96)") {
    const StepTimeQuantiles q = ComputeStepTimeQuantiles(rows_of({40, 10, 30, 20}));
    CHECK(q.p50 == 0.020);
    CHECK(q.p90 == 0.040);
    CHECK(q.p99 == 0.040);
  }
}

TEST_CASE("metrics: the simulated input-bound workload, collected, rendered, promtool-clean") {
  constexpr uint32_t kSteps = 40;
  Stream stream;
  // Producer rings as the stream counts them: two named alike, one that overflows.
  std::shared_ptr<Ring> cupti = stream.AddRing({.name = "cupti", .capacity = 4});
  std::shared_ptr<Ring> t1 = stream.AddRing({.name = "thread 1"});
  std::shared_ptr<Ring> t1b = stream.AddRing({.name = "thread 1"});
  REQUIRE(cupti);
  REQUIRE(t1);
  REQUIRE(t1b);
  const Event e{};
  for (int i = 0; i < 6; ++i) cupti->queue->TryPush(e);  // 4 fit, 2 dropped.
  for (int i = 0; i < 3; ++i) t1->queue->TryPush(e);
  for (int i = 0; i < 2; ++i) t1b->queue->TryPush(e);

  const test::SimulatedRun run = test::MakeSimulatedRun(Scenario::kInputBound, kSteps, &stream.names(), 11);
  Analyses analyses(AnalysesOptions{}, &stream.diagnostics());
  analyses.Consume(run.definitions, {}, {}, 0, 0);
  // In chunks, as the drain loop delivers them: the alerts evaluate on many steps.
  constexpr size_t kChunks = 20;
  const size_t chunk = run.events.size() / kChunks + 1;
  for (size_t i = 0; i < run.events.size(); i += chunk) {
    const std::span<const Event> part(run.events.data() + i, std::min(chunk, run.events.size() - i));
    analyses.Consume({}, part, {}, part.back().end(), part.back().end());
  }
  analyses.Flush(run.events.back().end());
  stream.diagnostics().Add(Diag::late_events, 5);

  const MetricsInput in = CollectMetrics(analyses, stream);
  CHECK(in.version == "0.1.0");
  CHECK(in.steps_closed == analyses.steps().steps_closed());
  CHECK(in.steps_closed >= kSteps - 1);
  CHECK(in.window.steps == kMetricsWindowSteps);
  CHECK(in.events_consumed == analyses.events_consumed());
  CHECK(in.events_published == 9);
  CHECK(in.events_dropped == 2);
  CHECK(in.late_events == 5);
  CHECK(in.input_bound == InputBound::kHighly);
  CHECK(in.input_ratio >= 0.30);
  CHECK(in.input_ratio == doctest::Approx(in.window.pct(Bucket::kInput) / 100));
  CHECK(in.step_time.p50 <= in.step_time.p90);
  CHECK(in.step_time.p90 <= in.step_time.p99);
  CHECK(in.step_time.p50 > 0);
  double ratio_sum = 0;
  for (double r : in.bucket_ratio) ratio_sum += r;
  CHECK(ratio_sum == doctest::Approx(1.0));

  const std::string text = RenderPrometheus(in);
  CHECK(HasLine(text, R"(liveprof_build_info{version="0.1.0"} 1)"));
  CHECK(HasLine(text, "liveprof_events_published_total 9"));
  CHECK(HasLine(text, "liveprof_events_dropped_total 2"));
  CHECK(HasLine(text, "liveprof_late_events_total 5"));
  CHECK(HasLine(text, R"(liveprof_source_events_published_total{source="cupti"} 4)"));
  CHECK(HasLine(text, R"(liveprof_source_events_dropped_total{source="cupti"} 2)"));
  CHECK(HasLine(text, R"(liveprof_source_events_published_total{source="thread 1"} 5)"));
  CHECK(HasLine(text, R"(liveprof_source_events_dropped_total{source="thread 1"} 0)"));
  CHECK(HasLine(text, "liveprof_steps_closed_total " + std::to_string(in.steps_closed)));
  CHECK(HasLine(text, "liveprof_window_steps 20"));
  CHECK(HasLine(text, R"(liveprof_input_bound{classification="highly"} 1)"));
  CHECK(HasLine(text, "liveprof_input_ratio " + FormatSampleValue(in.input_ratio)));
  CHECK(HasLine(text, R"(liveprof_step_time_seconds{percentile="50"} )" + FormatSampleValue(in.step_time.p50)));
  // liveprof's own rules: the input-bound ones fire on this workload.
  CHECK(HasLine(text, R"(liveprof_alert_firing{rule="input_bound_high",severity="critical"} 1)"));
  CHECK(HasLine(text, R"(liveprof_alert_firing{rule="input_bound_moderate",severity="warning"} 1)"));
  CHECK(HasLine(text, R"(liveprof_alert_firing{rule="kernel_launch_bound",severity="warning"} 0)"));
  CHECK(LinesStartingWith(text, "liveprof_alert_firing{").size() == DefaultAlertRules().size());
  // No op or kernel name reaches a label.
  CHECK(LinesStartingWith(text, "liveprof_").size() ==
        1 + 3 + 1 + 2 * 2 + 2 + 1 + 3 + kBucketCount + 1 + 5 + DefaultAlertRules().size());
  CheckWithPromtool(text, "simulated");
}

}  // namespace
}  // namespace liveprof::metrics_test
