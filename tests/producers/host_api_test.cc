// The host API writes into the process-wide GlobalStream(). Each test drains
// it with its own DrainLoop and looks only at the tracks of threads it
// started, so tests do not see each other's events.
#include "producers/host_api.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "stream/drain_loop.h"

namespace liveprof::host_api_test {
namespace {

// Runs `body` on a new thread and returns that thread's track id.
template <typename Fn>
TrackId RunOnThread(Fn body) {
  TrackId track = 0;
  std::thread t([&] {
    body();
    track = internal::t_slot.track;
  });
  t.join();
  return track;
}

// Drains the global stream to the end and returns the events of `track`.
std::vector<Event> DrainTrack(TrackId track) {
  std::vector<Event> out;
  DrainLoop loop(GlobalStream(), DrainLoop::Options{}, [&](const Batch& b) {
    for (const Event& e : b.events) {
      if (e.track == track && e.kind != EventKind::kTrackDef) out.push_back(e);
    }
  });
  loop.Flush();
  return out;
}

std::string NameOf(const Event& e) { return std::string(GlobalStream().names().Get(e.name)); }

}  // namespace

TEST_CASE("host api: every macro records its kind, name and payload") {
  int buffer[4];
  const TrackId track = RunOnThread([&] {
    LIVEPROF_STEP(42);
    { LIVEPROF_INPUT("load_batch"); }
    {
      LIVEPROF_OP("dense/MatMul:MatMul");
      LIVEPROF_SCOPE("inner");
    }
    LIVEPROF_INSTANT("checkpoint");
    LIVEPROF_COUNTER("queue_depth", 7.5);
    LIVEPROF_ALLOC("bfc", buffer, sizeof buffer);
    LIVEPROF_FREE("bfc", buffer, sizeof buffer);
  });
  REQUIRE(track != 0);
  const std::vector<Event> events = DrainTrack(track);
  std::map<EventKind, std::vector<Event>> by_kind;
  for (const Event& e : events) by_kind[e.kind].push_back(e);

  REQUIRE(by_kind[EventKind::kStepMarker].size() == 1);
  const Event& step = by_kind[EventKind::kStepMarker][0];
  CHECK(step.payload.step.step_num == 42);
  CHECK(NameOf(step) == "train");
  REQUIRE(by_kind[EventKind::kInputSpan].size() == 1);
  CHECK(NameOf(by_kind[EventKind::kInputSpan][0]) == "load_batch");
  REQUIRE(by_kind[EventKind::kFrameworkOp].size() == 1);
  const Event& op = by_kind[EventKind::kFrameworkOp][0];
  CHECK(NameOf(op) == "dense/MatMul:MatMul");
  REQUIRE(by_kind[EventKind::kHostSpan].size() == 1);
  const Event& inner = by_kind[EventKind::kHostSpan][0];
  CHECK(NameOf(inner) == "inner");
  // Nesting survives: the inner scope lies within the op, and the step
  // (opened first, closed last) contains everything.
  CHECK(inner.ts >= op.ts);
  CHECK(inner.end() <= op.end());
  CHECK(step.ts <= op.ts);
  CHECK(step.end() >= op.end());
  REQUIRE(by_kind[EventKind::kCounter].size() == 1);
  CHECK(by_kind[EventKind::kCounter][0].payload.counter.value == 7.5);
  REQUIRE(by_kind[EventKind::kAlloc].size() == 1);
  CHECK(by_kind[EventKind::kAlloc][0].payload.memory.address == reinterpret_cast<uintptr_t>(buffer));
  CHECK(by_kind[EventKind::kAlloc][0].payload.memory.bytes == sizeof buffer);
  CHECK(by_kind[EventKind::kAlloc][0].sub == static_cast<uint8_t>(MemoryKind::kHost));
  REQUIRE(by_kind[EventKind::kFree].size() == 1);
  CHECK(NameOf(by_kind[EventKind::kFree][0]) == "bfc");
  REQUIRE(by_kind[EventKind::kInstant].size() == 1);
  CHECK(NameOf(by_kind[EventKind::kInstant][0]) == "checkpoint");
  // The step is the last to complete, so it comes last in stream order.
  CHECK(events.back().kind == EventKind::kStepMarker);
}

TEST_CASE("host api: a thread that exits keeps its last events") {
  constexpr int kEvents = 1000;
  const TrackId track = RunOnThread([] {
    for (int i = 0; i < kEvents; ++i) {
      Scope s(InternName("last words"), EventKind::kHostSpan, static_cast<uint32_t>(i));
    }
  });
  const std::vector<Event> events = DrainTrack(track);
  REQUIRE(events.size() == kEvents);
  for (int i = 0; i < kEvents; ++i) CHECK(events[i].corr == static_cast<uint32_t>(i));
  for (const auto& r : GlobalStream().Stats()) CHECK(r.track != track);  // ring retired.
}

TEST_CASE("host api: many threads, per-thread sequence numbers, nothing lost") {
  constexpr int kThreads = 6;
  constexpr uint32_t kPerThread = 20'000;  // below the default 64 Ki ring capacity.
  std::vector<TrackId> tracks(kThreads);
  std::vector<std::thread> threads;
  const NameId name = InternName("seq");
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < kPerThread; ++i) Scope s(name, EventKind::kHostSpan, i);
      tracks[t] = internal::t_slot.track;
    });
  }
  for (auto& th : threads) th.join();
  std::map<TrackId, std::vector<uint32_t>> seqs;
  DrainLoop loop(GlobalStream(), DrainLoop::Options{}, [&](const Batch& b) {
    for (const Event& e : b.events) {
      if (e.kind == EventKind::kHostSpan && e.name == name) seqs[e.track].push_back(e.corr);
    }
  });
  loop.Flush();
  REQUIRE(seqs.size() == kThreads);
  for (TrackId t : tracks) {
    std::vector<uint32_t>& s = seqs[t];
    REQUIRE(s.size() == kPerThread);
    for (uint32_t i = 0; i < kPerThread; ++i) CHECK(s[i] == i);  // in order, each once.
  }
}

TEST_CASE("host api: tracing off records nothing") {
  SetTracingEnabled(false);
  const TrackId track = RunOnThread([] {
    LIVEPROF_SCOPE("invisible");
    LIVEPROF_INSTANT("invisible");
    BeginSpan(InternName("invisible"));
    EndSpan();
  });
  SetTracingEnabled(true);
  CHECK(track == 0);  // the thread never even needed a ring.
}

TEST_CASE("host api: odd calls are counted, never fatal") {
  Diagnostics& diag = GlobalStream().diagnostics();
  const uint64_t step_errors = diag.Get(Diag::step_end_without_begin);
  const uint64_t span_errors = diag.Get(Diag::span_end_without_begin);
  const uint64_t null_names = diag.Get(Diag::null_name);
  const TrackId track = RunOnThread([] {
    StepEnd(3);  // no step open.
    EndSpan();   // no span open.
    StepBegin(1);
    StepBegin(2);  // ends step 1.
    StepEnd(5);    // wrong number: counted, step 2 stays open.
    StepEnd(2);
    BeginSpan(InternName(static_cast<const char*>(nullptr)));
    EndSpan();
  });
  CHECK(diag.Get(Diag::step_end_without_begin) == step_errors + 2);
  CHECK(diag.Get(Diag::span_end_without_begin) == span_errors + 1);
  CHECK(diag.Get(Diag::null_name) == null_names + 1);
  std::vector<int64_t> steps;
  int null_spans = 0;
  for (const Event& e : DrainTrack(track)) {
    if (e.kind == EventKind::kStepMarker) steps.push_back(e.payload.step.step_num);
    if (e.kind == EventKind::kHostSpan && e.name == NameTable::kNullId) ++null_spans;
  }
  CHECK(steps == std::vector<int64_t>{1, 2});
  CHECK(null_spans == 1);
}

TEST_CASE("host api: spans nested past the stack limit are counted and stay balanced") {
  Diagnostics& diag = GlobalStream().diagnostics();
  const uint64_t overflows = diag.Get(Diag::span_stack_overflow);
  const NameId name = InternName("deep");
  const TrackId track = RunOnThread([&] {
    for (int i = 0; i < kMaxOpenSpans + 5; ++i) BeginSpan(name);
    for (int i = 0; i < kMaxOpenSpans + 5; ++i) EndSpan();
    EndSpan();  // one too many.
  });
  CHECK(diag.Get(Diag::span_stack_overflow) == overflows + 5);
  size_t spans = 0;
  for (const Event& e : DrainTrack(track)) spans += e.name == name ? 1 : 0;
  CHECK(spans == kMaxOpenSpans);
}

}  // namespace liveprof::host_api_test
