#include "aggregators/stream_summary.h"

#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "event_builder.h"

namespace liveprof::stream_summary_test {
namespace {

using test::NameDef;

}  // namespace

TEST_CASE("stream summary: counts by kind, totals by name, steps in order") {
  StreamSummary summary;
  const std::vector<Event> events = {
      NameDef(5, "MatMul"),
      test::Span(100, 50, 5, 1, EventKind::kFrameworkOp),
      test::Span(200, 150, 5, 1, EventKind::kFrameworkOp),
      test::Instant(300, 0, 1),
      test::Step(0, 400, 7, 1),
  };
  summary.Consume(events);
  const StreamSummarySnapshot s = summary.Snapshot();
  CHECK(s.events == 4);
  CHECK(s.name_defs == 1);
  CHECK(s.by_kind[static_cast<size_t>(EventKind::kFrameworkOp)] == 2);
  CHECK(s.by_kind[static_cast<size_t>(EventKind::kInstant)] == 1);
  REQUIRE(s.top_names.size() == 2);
  CHECK(s.top_names[0].name == "#0");  // the step (400 ns) before MatMul (200 ns).
  CHECK(s.top_names[1].name == "MatMul");
  CHECK(s.top_names[1].count == 2);
  CHECK(s.top_names[1].total_ns == 200);
  CHECK(s.top_names[1].max_ns == 150);
  REQUIRE(s.steps.size() == 1);
  CHECK(s.steps[0].step_num == 7);
  CHECK(s.steps[0].dur_ns == 400);
  CHECK(s.first_ts == 0);
  CHECK(s.last_end == 400);
}

TEST_CASE("stream summary: incremental equals batch on random streams") {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<Event> events;
    const int n = 1 + static_cast<int>(rng() % 2000);
    for (int i = 0; i < n; ++i) {
      const auto kind =
          std::array{EventKind::kHostSpan, EventKind::kKernel, EventKind::kInstant, EventKind::kStepMarker}[rng() % 4];
      Event e =
          test::Span(rng() % 100'000, kind == EventKind::kInstant ? 0 : rng() % 1000, rng() % 17, rng() % 5, kind);
      if (kind == EventKind::kStepMarker) e.payload.step.step_num = i;
      events.push_back(e);
    }
    StreamSummary batch, incremental;
    batch.Consume(events);
    for (size_t pos = 0; pos < events.size();) {
      const size_t len = std::min<size_t>(1 + rng() % 64, events.size() - pos);
      incremental.Consume(std::span(events).subspan(pos, len));
      pos += len;
    }
    const auto a = batch.Snapshot(100), b = incremental.Snapshot(100);
    CHECK(a.events == b.events);
    CHECK(a.by_kind == b.by_kind);
    CHECK(a.first_ts == b.first_ts);
    CHECK(a.last_end == b.last_end);
    REQUIRE(a.top_names.size() == b.top_names.size());
    for (size_t i = 0; i < a.top_names.size(); ++i) {
      CHECK(a.top_names[i].name == b.top_names[i].name);
      CHECK(a.top_names[i].total_ns == b.top_names[i].total_ns);
      CHECK(a.top_names[i].count == b.top_names[i].count);
    }
    REQUIRE(a.tracks.size() == b.tracks.size());
    CHECK(a.steps.size() == b.steps.size());
  }
}

}  // namespace liveprof::stream_summary_test
