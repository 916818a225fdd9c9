// The whole analysis pipeline on a synthetic input-bound training stream:
// the views agree with each other and with the stream, the input-bound alert
// fires, and chunked feeding renders exactly what one batch renders.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "aggregators/analyses.h"
#include "doctest/doctest.h"
#include "event_builder.h"
#include "stream/stream.h"
#include "synthetic_workload.h"

namespace liveprof::analyses_test {
namespace {

void Feed(Analyses& a, const test::Workload& w, size_t batch) {
  a.Consume(w.definitions, {}, {}, 0, 0);
  for (size_t i = 0; i < w.events.size(); i += batch) {
    const size_t n = std::min(batch, w.events.size() - i);
    const std::span<const Event> part(w.events.data() + i, n);
    a.Consume({}, part, {}, part.back().end(), part.back().end());
  }
  a.Flush(w.events.back().end());
}

nlohmann::json Parse(const std::string& s) { return nlohmann::json::parse(s); }

TEST_CASE("analyses: an input-bound stream, end to end") {
  test::WorkloadShape shape;
  shape.steps = 30;
  shape.input_ns = 6'000'000;  // 6 ms of loading per step against ~8 ms of GPU work.
  const test::Workload w = test::MakeWorkload(shape);
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  Feed(a, w, 1000);
  const RenderedViews v = a.Render(RenderOptions{});

  const auto steps = Parse(v.steps);
  CHECK(steps["type"] == "steps");
  CHECK(steps["v"] == kViewProtocolVersion);
  CHECK(steps["steps_total"] == 30);
  CHECK(steps["window"]["steps"] == 30);
  const double input_pct = steps["window"]["pct"]["input"].get<double>();
  CHECK(input_pct > 20);

  const auto overview = Parse(v.overview);
  CHECK(overview["recommendation"]["bottleneck"] == "HIGHLY input-bound");
  CHECK(overview["summary"]["pct"]["input"].get<double>() == doctest::Approx(input_pct));
  CHECK(overview["top_ops"].size() == 10);
  CHECK(overview["run_environment"]["step_source"] == "step_marker");

  const auto input = Parse(v.input_pipeline);
  CHECK(input["bottleneck"]["input_classification"] == "HIGHLY input-bound");
  CHECK(input["host_side"]["ops"].size() == 1);  // decode_jpeg; IteratorGetNext is not an input op.
  CHECK(input["host_side"]["ops"][0]["name"] == "decode_jpeg");

  const auto alerts = Parse(v.alerts);
  bool input_firing = false;
  for (const auto& f : alerts["firing"]) input_firing |= f["rule"] == "input_bound_high";
  CHECK(input_firing);

  // Every kernel in the stream is in the kernel table, once.
  uint64_t kernels = 0;
  for (const Event& e : w.events) kernels += e.kind == EventKind::kKernel ? 1 : 0;
  const auto ks = Parse(v.kernel_stats);
  uint64_t occurrences = 0;
  for (const auto& r : ks["rows"]) occurrences += r["occurrences"].get<uint64_t>();
  CHECK(occurrences == kernels);

  const auto status = Parse(v.status);
  CHECK(status["events_consumed"] == w.events.size());
  CHECK(status["steps_closed"] == 30);
  CHECK(diag.Get(Diag::late_for_step) == 0);
  CHECK(diag.Get(Diag::device_without_launch) == 0);
  CHECK(v.tf_stats_csv.empty());  // CSV only on request.
  const RenderedViews with_csv = a.Render(RenderOptions{.csv = true});
  CHECK(with_csv.tf_stats_csv.starts_with("rank,side,type,name,"));
  CHECK(with_csv.kernel_stats_csv.find("volta_h884gemm_") != std::string::npos);
}

TEST_CASE("analyses: chunked feeding renders what one batch renders") {
  test::WorkloadShape shape;
  shape.steps = 12;
  shape.seed = 7;
  const test::Workload w = test::MakeWorkload(shape);
  Diagnostics d1, d2;
  Analyses batch(AnalysesOptions{}, &d1), chunked(AnalysesOptions{}, &d2);
  Feed(batch, w, w.events.size());
  Feed(chunked, w, 97);
  const RenderedViews a = batch.Render(RenderOptions{}), b = chunked.Render(RenderOptions{});
  CHECK(a.overview == b.overview);
  CHECK(a.steps == b.steps);
  CHECK(a.input_pipeline == b.input_pipeline);
  CHECK(a.tf_stats == b.tf_stats);
  CHECK(a.kernel_stats == b.kernel_stats);
  CHECK(a.memory == b.memory);
}

TEST_CASE("analyses: drops reported by the stream fire the drop alert with their count") {
  test::WorkloadShape shape;
  shape.steps = 10;
  const test::Workload w = test::MakeWorkload(shape);
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  a.Consume(w.definitions, {}, {}, 0, 0);
  const size_t half = w.events.size() / 2;
  const std::span<const Event> first(w.events.data(), half), second(w.events.data() + half, w.events.size() - half);
  a.SetStreamTotals(half, 0);
  a.Consume({}, first, {}, first.back().end(), first.back().end());
  CHECK(a.TakeAlertEvents().empty());
  a.SetStreamTotals(w.events.size(), 7);  // the rings dropped 7 meanwhile.
  a.Consume({}, second, {}, second.back().end(), second.back().end());
  const std::vector<AlertEvent> events = a.TakeAlertEvents();
  bool fired = false;
  for (const AlertEvent& e : events) {
    if (e.rule != "events_dropped") continue;
    fired = true;
    CHECK(e.value == 7);
  }
  CHECK(fired);
}

TEST_CASE("analyses: a finished job is not stalled, a live or cut-off one is") {
  test::WorkloadShape shape;
  shape.steps = 10;
  const test::Workload w = test::MakeWorkload(shape);
  for (const JobState state : {JobState::kFinished, JobState::kDisconnected, JobState::kLive}) {
    CAPTURE(JobStateName(state));
    Diagnostics diag;
    Analyses a(AnalysesOptions{}, &diag);
    Feed(a, w, 1000);
    a.TakeAlertEvents();
    const uint64_t end = w.events.back().end();
    a.SetJobState(state);  // (as Pipeline::Publish hands it over)
    bool stalled = false;
    for (uint64_t s = 1; s <= 120; ++s) {  // two minutes of nothing.
      const uint64_t now = end + s * 1'000'000'000;
      a.Consume({}, {}, {}, now, now);
      for (const AlertEvent& e : a.TakeAlertEvents()) stalled |= e.rule == "training_stalled";
    }
    // A job that ended (finished, or every source cut off) has its alerts
    // closed: it is not stalled, it is over.
    CHECK(stalled == (state == JobState::kLive));
    CHECK(Parse(a.Render(RenderOptions{}).status)["job_state"] == std::string(JobStateName(state)));
  }
  // A job again after one finished (a rerun on the same server): 30 s
  // without a step is no stall yet; its clock began when it went live.
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  Feed(a, w, 1000);
  const uint64_t end = w.events.back().end();
  a.SetJobState(JobState::kFinished);
  a.Consume({}, {}, {}, end + 1'000'000'000, end + 1'000'000'000);
  a.SetJobState(JobState::kLive);
  a.TakeAlertEvents();
  bool stalled = false;
  for (uint64_t s = 2; s <= 120; ++s) {
    const uint64_t now = end + s * 1'000'000'000;
    a.Consume({}, {}, {}, now, now);
    for (const AlertEvent& e : a.TakeAlertEvents()) {
      if (e.rule == "training_stalled") {
        stalled = true;
        CHECK(s >= 61);  // 60 s after it went live (second 1), not at once.
      }
    }
  }
  CHECK(stalled);
}

TEST_CASE("analyses: at the end of a job its alerts close, at end of job, with their last values") {
  test::WorkloadShape shape;
  shape.steps = 30;
  shape.input_ns = 6'000'000;  // input-bound: input_bound_high fires.
  const test::Workload w = test::MakeWorkload(shape);
  for (const JobState end : {JobState::kFinished, JobState::kDisconnected}) {
    CAPTURE(JobStateName(end));
    Diagnostics diag;
    Analyses a(AnalysesOptions{}, &diag);
    Feed(a, w, 1000);
    a.TakeAlertEvents();
    auto alerts = Parse(a.Render(RenderOptions{}).alerts);
    std::map<std::string, double> last;  // rule -> its value now, of those firing.
    for (const auto& r : alerts["rules"]) {
      if (r["state"] == "firing") last[r["name"]] = r["value"].get<double>();
    }
    REQUIRE(last.count("input_bound_high") == 1);
    for (const auto& f : alerts["firing"]) CHECK(f["value_now"].get<double>() == last.at(f["rule"]));
    a.SetJobState(end);
    const std::vector<AlertEvent> closed = a.TakeAlertEvents();
    CHECK(closed.size() == last.size());
    for (const AlertEvent& e : closed) {
      CHECK(e.state == AlertEventState::kClosed);
      CHECK(e.value == last.at(e.rule));
      CHECK(e.summary.find(" closed at end of job: last ") != std::string::npos);
    }
    alerts = Parse(a.Render(RenderOptions{}).alerts);
    CHECK(alerts["firing"].empty());
    for (const auto& r : alerts["rules"]) CHECK(r["state"] != "firing");
    // Nothing fires after the end, however long the server stays up.
    const uint64_t t = w.events.back().end();
    for (uint64_t s = 1; s <= 120; ++s) a.Consume({}, {}, {}, t + s * 1'000'000'000, t + s * 1'000'000'000);
    CHECK(a.TakeAlertEvents().empty());
  }
}

TEST_CASE("analyses: a step window draws every step it holds, up to 1000, and says what it left out") {
  test::WorkloadShape shape;
  shape.steps = 300;
  const test::Workload w = test::MakeWorkload(shape);
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  Feed(a, w, 4096);
  RenderOptions ro;
  ro.steps = WindowSel{.last_steps = 1000};  // the dashboard's "last 1000 steps" on a 300-step job.
  const auto steps = Parse(a.Render(ro).steps);
  const int64_t held = steps["window"]["steps"].get<int64_t>();
  CHECK(held == steps["steps_total"].get<int64_t>() - steps["steps_dropped"].get<int64_t>());
  CHECK(steps["rows"].size() == static_cast<size_t>(held));  // all of them, not the newest 200.
  CHECK(steps["rows"][0]["step"] == steps["window"]["first_step"]);
  CHECK(steps["rows_left_out"] == 0);
  CHECK(steps["rows_cap"] == 1000);
  CHECK(steps["steps_kept"] == 10000);
}

TEST_CASE("analyses: a job with no device says so, and its overview's top ops are the host's named ops") {
  test::WorkloadShape shape;
  shape.steps = 20;
  test::Workload w = test::MakeWorkload(shape);
  {
    Diagnostics diag;
    Analyses gpu(AnalysesOptions{}, &diag);
    Feed(gpu, w, 1000);
    const RenderedViews v = gpu.Render(RenderOptions{});
    CHECK(Parse(v.status)["has_device"] == true);
    const auto o = Parse(v.overview);
    CHECK(o["has_device"] == true);
    CHECK(o["top_ops_side"] == "device");
  }
  // The same job on the CPU: its framework ops and input, no CUDA call, no
  // kernel, no copy, no device memory.
  std::erase_if(w.events, [](const Event& e) {
    return e.kind == EventKind::kKernel || e.kind == EventKind::kMemcpyHtoD || e.kind == EventKind::kRuntimeApi ||
           e.kind == EventKind::kAlloc || e.kind == EventKind::kFree;
  });
  Diagnostics diag;
  Analyses cpu(AnalysesOptions{}, &diag);
  Feed(cpu, w, 1000);
  const RenderedViews v = cpu.Render(RenderOptions{});
  CHECK(Parse(v.status)["has_device"] == false);
  const auto o = Parse(v.overview);
  CHECK(o["has_device"] == false);
  CHECK(o["top_ops_side"] == "host");
  CHECK(o["run_environment"]["device_type"] == "CPU");
  REQUIRE(o["top_ops"].size() == 10);
  // The host table's named ops, in its order, as shares of the ops' time.
  const auto tf = Parse(v.tf_stats);
  std::vector<std::string> named;
  for (const auto& r : tf["host"]["rows"]) {
    const std::string n = r["name"];
    if (n != "Host compute (unattributed)" && n != "IDLE") named.push_back(n);
  }
  double cumulative = 0;
  for (size_t i = 0; i < 10; ++i) {
    CHECK(o["top_ops"][i]["name"] == named[i]);
    CHECK(o["top_ops"][i]["name"].get<std::string>() != "Host compute (unattributed)");
    cumulative += o["top_ops"][i]["self_pct"].get<double>();
    CHECK(o["top_ops"][i]["cumulative_pct"].get<double>() == doctest::Approx(cumulative));
  }
  CHECK(cumulative > 0);
  CHECK(cumulative <= 100.0001);
}

TEST_CASE("analyses: a span with a bad duration is counted once and reaches no table") {
  test::WorkloadShape shape;
  shape.steps = 3;
  const test::Workload w = test::MakeWorkload(shape);
  std::vector<Event> events = w.events;
  Event bad = events.front();
  bad.kind = EventKind::kKernel;
  bad.dur = ~uint64_t{0} - 10;  // an end before its begin, seen unsigned.
  events.insert(events.begin() + 5, bad);
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  a.Consume(w.definitions, events, {}, events.back().end(), events.back().end());
  a.Flush(events.back().end());
  CHECK(diag.Get(Diag::bad_duration) == 1);  // not once per aggregator.
  CHECK(a.events_consumed() == w.events.size());
  uint64_t kernels = 0;
  for (const Event& e : w.events) kernels += e.kind == EventKind::kKernel ? 1 : 0;
  const auto ks = Parse(a.Render(RenderOptions{}).kernel_stats);
  uint64_t occurrences = 0;
  for (const auto& r : ks["rows"]) occurrences += r["occurrences"].get<uint64_t>();
  CHECK(occurrences == kernels);
}

TEST_CASE("analyses: with several workers the views follow one (the first to send a step), the pod view has all") {
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  // Two workers (processes 1 and 2), a thread row each and a process row naming them.
  const std::string names[] = {"", "rank 0", "rank 1", "rank 0 · main", "rank 1 · main", "train", "op"};
  std::vector<Event> defs;
  for (NameId n = 1; n < 7; ++n) defs.push_back(NameDefEvent(n, names[n]));
  defs.push_back(TrackDefEvent(1, TrackInfo{1, TrackType::kProcess, 100, 0, 1}));
  defs.push_back(TrackDefEvent(2, TrackInfo{2, TrackType::kProcess, 200, 0, 2}));
  defs.push_back(TrackDefEvent(3, TrackInfo{3, TrackType::kHostThread, 101, 0, 1}));
  defs.push_back(TrackDefEvent(4, TrackInfo{4, TrackType::kHostThread, 201, 0, 2}));
  // Rank 1's steps come first in the stream; both run steps 0..9, rank 1 twice as slow.
  std::vector<Event> events;
  for (int64_t n = 0; n < 10; ++n) {
    for (const auto& [track, ms] : {std::pair<TrackId, uint64_t>{4, 20}, {3, 10}}) {
      Event op;
      op.kind = EventKind::kFrameworkOp;
      op.name = 6;
      op.track = track;
      op.ts = 1'000'000'000 + n * 50'000'000;
      op.dur = ms * 1'000'000 - 1'000;
      Event step = op;
      step.kind = EventKind::kStepMarker;
      step.name = 5;
      step.dur = ms * 1'000'000;
      step.payload.step.step_num = n;
      events.push_back(op);
      events.push_back(step);
    }
  }
  a.Consume(defs, events, {}, 2'000'000'000, 2'000'000'000);
  a.Flush(3'000'000'000);
  const RenderedViews v = a.Render(RenderOptions{});
  const auto status = Parse(v.status);
  CHECK(status["analysed_process"] == 2);
  CHECK(status["analysed_worker"] == "rank 1");
  const auto overview = Parse(v.overview);
  CHECK(overview["summary"]["steps"] == 10);  // one worker's 10 steps, not 20.
  CHECK(overview["summary"]["step_time_ms_avg"].get<double>() == doctest::Approx(20.0));
  const auto pod = Parse(v.pod);
  CHECK(pod["workers"].size() == 2);
}

TEST_CASE("analyses: a worker's DataLoader workers are in its input tables, not in its steps, host time or Pod") {
  // Process 1 trains ("host:10"); process 2 ("host:10 · loader 0") fetches
  // its batches; process 3 is another job's loader ("host:99 · loader 0").
  // Either order of definition: a loader may connect before its parent.
  for (const bool loader_first : {false, true}) {
    CAPTURE(loader_first);
    Diagnostics diag;
    AnalysesOptions options;
    options.pod.max_workers = 2;  // (host:10 and host:99: a loader that took a slot would leave the rank none)
    Analyses a(options, &diag);
    const std::string names[] = {"",       "host:10", "host:10 · loader 0",      "host:99 · loader 0",
                                 "train",  "wait",    "DataLoader fetch#Images", "op",
                                 "host:99"};
    std::vector<Event> defs;
    for (NameId n = 1; n < 9; ++n) defs.push_back(NameDefEvent(n, names[n]));
    std::vector<Event> processes = {TrackDefEvent(1, TrackInfo{1, TrackType::kProcess, 10, 0, 1}),
                                    TrackDefEvent(2, TrackInfo{8, TrackType::kProcess, 99, 0, 4}),
                                    TrackDefEvent(3, TrackInfo{2, TrackType::kProcess, 11, 0, 2}),
                                    TrackDefEvent(4, TrackInfo{3, TrackType::kProcess, 98, 0, 3})};
    if (loader_first) std::reverse(processes.begin(), processes.end());
    defs.insert(defs.end(), processes.begin(), processes.end());
    defs.push_back(TrackDefEvent(5, TrackInfo{0, TrackType::kHostThread, 10, 0, 1}));
    defs.push_back(TrackDefEvent(6, TrackInfo{0, TrackType::kHostThread, 11, 0, 2}));
    defs.push_back(TrackDefEvent(7, TrackInfo{0, TrackType::kHostThread, 98, 0, 3}));
    auto input_span = [](NameId name, TrackId track, uint64_t ts, uint64_t dur, InputStage stage) {
      Event e = test::Input(ts, dur, name, track);
      e.sub = static_cast<uint8_t>(stage);
      return e;
    };
    std::vector<Event> events;
    // The loader's first fetch comes before any step (the first event of
    // the stream): the loader is never the analysed worker.
    events.push_back(input_span(6, 6, 500'000'000, 80'000'000, InputStage::kPreprocess));
    for (int64_t n = 0; n < 10; ++n) {
      const uint64_t t = 1'000'000'000 + n * 100'000'000;
      // The loaders' fetches: 80 ms inside each 100 ms step, 20 ms apart.
      events.push_back(input_span(6, 6, t + 10'000'000, 80'000'000, InputStage::kPreprocess));
      events.push_back(input_span(6, 7, t + 10'000'000, 80'000'000, InputStage::kPreprocess));
      events.push_back(input_span(5, 5, t, 10'000'000, InputStage::kWait));  // 10 ms waiting
      events.push_back(test::Op(t + 10'000'000, 90'000'000, 7, 5));
      Event step = test::Step(t, 100'000'000, n, 5);
      step.name = 4;
      events.push_back(step);
    }
    std::stable_sort(events.begin(), events.end(), CompletionOrderLess);
    a.Consume(defs, std::span<const Event>(events).first(1), {}, 600'000'000, 600'000'000);
    a.Consume({}, std::span<const Event>(events).subspan(1), {}, 3'000'000'000, 3'000'000'000);
    a.Flush(3'000'000'000);
    const RenderedViews v = a.Render(RenderOptions{});
    const auto status = Parse(v.status);
    CHECK(status["analysed_worker"] == "host:10");
    const auto input = Parse(v.input_pipeline);
    // The steps: 10 % input (the wait), not the loader's 80 %.
    CHECK(input["bottleneck"]["input_pct"].get<double>() == doctest::Approx(10.0));
    // The host-side table: this job's loader's 11 fetches (880 ms), not the other's.
    const auto& ops = input["host_side"]["ops"];
    REQUIRE(ops.size() == 1);
    CHECK(ops[0]["name"] == "DataLoader fetch#Images");
    CHECK(ops[0]["count"] == 11);
    CHECK(ops[0]["total_ms"].get<double>() == doctest::Approx(880.0));
    CHECK(ops[0]["category"] == "Preprocessing");
    // TF stats: the training process's time only. The loader's fetches are
    // its own (the input pipeline's workers rows), neither host rows nor
    // host time; its thread, idle 20 ms between fetches, is none of the
    // host's IDLE (the trainer's thread is busy throughout: 0).
    const auto tf = Parse(v.tf_stats);
    CHECK(tf["host"]["idle_us"].get<double>() == doctest::Approx(0.0));
    CHECK(tf["host"]["op_us"].get<double>() == doctest::Approx(1'000'000.0));
    for (const auto& row : tf["host"]["rows"]) CHECK(row["name"] != "DataLoader fetch#Images");
    CHECK(tf["host"]["rows"].back()["cumulative_pct"].get<double>() == doctest::Approx(100.0));
    // The loader's own row, labelled with its process: 800 ms of fetching
    // in the steps' 1 s (the fetch at 0.5 s is before them).
    const auto& workers = input["host_side"]["workers"];
    REQUIRE(workers["rows"].size() == 1);
    CHECK(workers["rows"][0]["process"] == "host:10 · loader 0");
    CHECK(workers["rows"][0]["fetches"] == 10);
    CHECK(workers["busy_pct"].get<double>() == doctest::Approx(80.0));
    // The Pod page: the one process with steps.
    const auto pod = Parse(v.pod);
    REQUIRE(pod["workers"].size() == 1);
    CHECK(pod["workers"][0]["label"] == "host:10");
    CHECK(pod["diagnostics"]["events_over_worker_cap"] == 0);
    CHECK(pod["diagnostics"]["workers_over_cap"] == 0);
  }
}

// A training process ("host:10") and its two DataLoader workers, each
// fetching one batch per 20 ms step for `fetch_ms`; the loop waits 5 ms of
// each step for its batch, 100 steps. The views' JSON.
RenderedViews TwoWorkerJob(uint64_t fetch_ms) {
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  const std::string names[] = {"",
                               "host:10",
                               "host:10 · loader 0",
                               "host:10 · loader 1",
                               "train",
                               "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                               "DataLoader fetch#Images",
                               "aten::conv2d"};
  std::vector<Event> defs;
  for (NameId n = 1; n < 8; ++n) defs.push_back(NameDefEvent(n, names[n]));
  for (uint32_t p = 1; p <= 3; ++p) {
    defs.push_back(TrackDefEvent(p, TrackInfo{p, TrackType::kProcess, 9 + p, 0, p}));
    defs.push_back(TrackDefEvent(3 + p, TrackInfo{0, TrackType::kHostThread, 9 + p, 0, p}));
  }
  constexpr uint64_t kStepNs = 20'000'000, kWaitNs = 5'000'000, kStart = 1'000'000'000;
  std::vector<Event> events;
  for (int64_t n = 0; n < 100; ++n) {
    const uint64_t t = kStart + static_cast<uint64_t>(n) * kStepNs;
    if (n % 2 == 0) {  // each worker fetches every other batch, two steps ahead.
      for (TrackId worker : {5, 6}) {
        Event fetch = test::Input(t, fetch_ms * 1'000'000 * 2, 6, worker);
        fetch.sub = static_cast<uint8_t>(InputStage::kPreprocess);
        events.push_back(fetch);
      }
    }
    Event wait = test::Span(t, kWaitNs, 5, 4);
    events.push_back(wait);
    events.push_back(test::Op(t + kWaitNs, kStepNs - kWaitNs, 7, 4));
    Event step = test::Step(t, kStepNs, n, 4);
    step.name = 4;
    events.push_back(step);
  }
  std::stable_sort(events.begin(), events.end(), CompletionOrderLess);
  a.Consume(defs, events, {}, 4'000'000'000, 4'000'000'000);
  a.Flush(5'000'000'000);
  return a.Render(RenderOptions{});
}

TEST_CASE("analyses: DataLoader advice follows the workers' rows, busy or idle, and TF stats are the trainer's") {
  // Busy: each worker fetches for 19 ms of each 20 ms step (95 %).
  const auto busy = Parse(TwoWorkerJob(19).input_pipeline);
  CHECK(busy["bottleneck"]["input_pct"].get<double>() == doctest::Approx(25.0));
  CHECK(busy["bottleneck"]["input_class"] == "host");
  CHECK(busy["bottleneck"]["input_class_statement"].get<std::string>().find("Input on \"host\"") == 0);
  CHECK(busy["host_side"]["loader_verdict"] == "busy");
  CHECK(busy["host_side"]["workers"]["rows"].size() == 2);
  CHECK(busy["host_side"]["workers"]["rows"][1]["process"] == "host:10 · loader 1");
  CHECK(busy["host_side"]["workers"]["busy_pct"].get<double>() == doctest::Approx(95.0));
  CHECK(busy["host_side"]["recommendations"][0].get<std::string>().starts_with("Add workers"));
  // Idle: 1 ms of each 20 ms step (5 %), the loop still waits 5 ms: the
  // wait is the hand-off; no "add workers".
  const RenderedViews idle_views = TwoWorkerJob(1);
  const auto idle = Parse(idle_views.input_pipeline);
  CHECK(idle["host_side"]["loader_verdict"] == "handoff");
  CHECK(idle["host_side"]["workers"]["busy_pct"].get<double>() == doctest::Approx(5.0));
  const auto& advice = idle["host_side"]["recommendations"];
  REQUIRE(!advice.empty());
  CHECK(advice[0].get<std::string>().find("hand-off") != std::string::npos);
  for (const auto& a : advice) CHECK(a.get<std::string>().find("raise num_workers") == std::string::npos);
  CHECK(idle["host_side"]["source_statement"].get<std::string>().find("busy 5.0%") != std::string::npos);
  // TF stats: the trainer's 2 s of steps, not the workers' fetches.
  const auto tf = Parse(idle_views.tf_stats);
  CHECK(tf["host"]["op_us"].get<double>() == doctest::Approx(2'000'000.0));
  for (const auto& row : tf["host"]["rows"]) CHECK(row["name"] != "DataLoader fetch#Images");
}

}  // namespace
}  // namespace liveprof::analyses_test

namespace liveprof::analyses_test {
namespace {

// A clock that moves 1 ms at each reading.
uint64_t g_fake_now_ns = 0;
uint64_t FakeClock() { return g_fake_now_ns += 1'000'000; }

TEST_CASE("analyses: with a clock, the status shows each analysis' time on the pipeline thread and its backlog") {
  test::WorkloadShape shape;
  shape.steps = 3;
  const test::Workload w = test::MakeWorkload(shape);
  Diagnostics diag;
  {  // No clock (tests, analyze): nothing timed, no pipeline_cost.
    Analyses a(AnalysesOptions{}, &diag);
    Feed(a, w, 1000);
    CHECK_FALSE(Parse(a.Render(RenderOptions{}).status).contains("pipeline_cost"));
    CHECK(a.costs()[static_cast<size_t>(Analysis::kSteps)].batches == 0);
  }
  AnalysesOptions o;
  o.clock_ns = &FakeClock;
  Analyses a(o, &diag);
  Feed(a, w, 1000);
  const size_t batches = (w.events.size() + 999) / 1000;
  a.AddCost(Analysis::kTraceStore, 25'000'000);  // the pipeline's own stages add theirs.
  a.AddCost(Analysis::kTraceStore, 2'000'000);
  const auto status = Parse(a.Render(RenderOptions{}).status);
  REQUIRE(status.contains("pipeline_cost"));
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& c : status["pipeline_cost"]) by_name[c["name"].get<std::string>()] = c;
  REQUIRE(by_name.size() == static_cast<size_t>(Analysis::kCount));
  // Each timed call reads the clock twice: 1 ms each.
  CHECK(by_name["kernel_stats"]["batches"] == batches);
  CHECK(by_name["kernel_stats"]["total_ms"] == doctest::Approx(static_cast<double>(batches)));
  CHECK(by_name["kernel_stats"]["max_batch_ms"] == doctest::Approx(1.0));
  CHECK(by_name["kernel_stats"]["batches_over_10ms"] == 0);
  // Its Consume, then the step closing, which the definitions-only batch runs too.
  CHECK(by_name["steps"]["batches"] == 2 * batches + 1);
  CHECK(by_name["trace_store"]["batches"] == 2);
  CHECK(by_name["trace_store"]["total_ms"] == doctest::Approx(27.0));
  CHECK(by_name["trace_store"]["max_batch_ms"] == doctest::Approx(25.0));
  CHECK(by_name["trace_store"]["batches_over_10ms"] == 1);
  CHECK(by_name["render"]["batches"] == 0);
  // The drain thread's queue for the pipeline thread, as the pipeline says.
  a.SetPipelineBacklog(1'500, 300'000);
  const auto later = Parse(a.Render(RenderOptions{}).status);
  CHECK(later["pipeline_backlog"]["events"] == 1'500);
  CHECK(later["pipeline_backlog"]["max_events"] == 300'000);
}

}  // namespace
}  // namespace liveprof::analyses_test
