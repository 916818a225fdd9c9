// DerivedRows: each GPU's Steps and Framework ops rows, as xprof derives
// them (tf-profiler-semantics.md §9.5), and the store keeping them apart
// from the producers' tracks.
#include "store/derived_rows.h"

#include <doctest/doctest.h>

#include <vector>

#include "store/trace_store.h"
#include "event_builder.h"

namespace liveprof {
namespace {

// A kernel of `op` on a device's stream (the corr: its start, unique here).
Event Kernel(uint8_t device, TrackId stream, uint64_t ts, uint64_t dur, NameId op) {
  return test::Kernel(ts, dur, 99, static_cast<uint32_t>(ts), stream, op, 0, device);
}

Event Step(uint64_t ts, uint64_t dur, int64_t n) { return test::Step(ts, dur, n, 1); }

TEST_CASE("derived rows: consecutive kernels of one op make one Framework ops event per GPU") {
  DerivedRows rows;
  std::vector<Event> out;
  // GPU 0: op 5 (two kernels on two streams, out of start order), op 6, op 0
  // (no op: skipped), op 5 again (a new event: not consecutive). GPU 1: op 6.
  rows.Derive({{Kernel(0, 3, 100, 10, 5), Kernel(0, 4, 90, 5, 5), Kernel(1, 8, 95, 50, 6), Kernel(0, 3, 130, 20, 6),
                Kernel(0, 3, 160, 5, 0), Kernel(0, 3, 170, 5, 5)}},
              &out);
  REQUIRE(out.size() == 2);  // op 5 [90, 110] and op 6 [130, 150] closed; GPU 0's second op 5 and GPU 1's op 6 open.
  CHECK(out[0].track == DerivedRows::TrackOf(0, DerivedRows::Row::kFrameworkOps));
  CHECK(out[0].kind == EventKind::kFrameworkOp);
  CHECK(out[0].name == 5);
  CHECK(out[0].ts == 90);
  CHECK(out[0].dur == 20);
  CHECK(out[0].corr == 0);  // no second arrow from the launch.
  CHECK(out[1].name == 6);
  CHECK(out[1].ts == 130);
  CHECK(out[1].dur == 20);
  // The open ones carry over to the next batch: op 5 goes on.
  rows.Derive({{Kernel(0, 3, 180, 10, 5)}}, &out);
  CHECK(out.empty());
  rows.Flush(&out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].track == DerivedRows::TrackOf(0, DerivedRows::Row::kFrameworkOps));
  CHECK(out[0].ts == 170);
  CHECK(out[0].dur == 20);
  CHECK(out[1].track == DerivedRows::TrackOf(1, DerivedRows::Row::kFrameworkOps));
  CHECK(out[1].device == 1);
  CHECK(out[1].name == 6);
}

TEST_CASE("derived rows: a step's end closes the ops, late kernels and unstored tracks are left out") {
  DerivedRows rows;
  std::vector<Event> out;
  Event late = Kernel(0, 3, 100, 5, 5);
  late.flags = kFlagLate;
  Event foreign = Step(0, 50, 9);
  foreign.track = DerivedRows::kFirstDerivedTrack + 3;
  // Ops 5, 6, 5 around 1,000 ns; a late op-5 kernel at 100 ns must not
  // stretch the open op 5 back over op 6.
  rows.Derive({{Kernel(0, 3, 1000, 50, 5), Kernel(0, 3, 1100, 50, 6), Kernel(0, 3, 1200, 10, 5), late, foreign}}, &out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].name == 5);
  CHECK(out[1].name == 6);  // (the foreign step made no Steps copy)
  // The step ends: the open op 5 closes where it ended, before the step's copy.
  rows.Derive({{Step(900, 400, 1), Kernel(0, 3, 1400, 10, 5)}}, &out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].track == DerivedRows::TrackOf(0, DerivedRows::Row::kFrameworkOps));
  CHECK(out[0].name == 5);
  CHECK(out[0].ts == 1200);
  CHECK(out[0].dur == 10);
  CHECK(out[1].track == DerivedRows::TrackOf(0, DerivedRows::Row::kSteps));
  // The next step's op 5 is a new event.
  rows.Flush(&out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].ts == 1400);
}

TEST_CASE("derived rows: every step on every GPU seen, from its stream's definition or its first kernel") {
  DerivedRows rows;
  std::vector<Event> out;
  rows.Derive({{Step(0, 100, 1)}}, &out);
  CHECK(out.empty());  // no GPU yet: a host-only run has no device rows.
  rows.Define(4, TrackInfo{0, TrackType::kGpuStream, 7, 2});
  rows.Define(5, TrackInfo{0, TrackType::kHostThread, 7, 0});
  rows.Derive({{Kernel(3, 9, 150, 1, 0), Step(100, 100, 2)}}, &out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].track == DerivedRows::TrackOf(2, DerivedRows::Row::kSteps));
  CHECK(out[1].track == DerivedRows::TrackOf(3, DerivedRows::Row::kSteps));
  for (const Event& s : out) {
    CHECK(s.kind == EventKind::kStepMarker);
    CHECK(s.ts == 100);
    CHECK(s.dur == 100);
    CHECK(s.payload.step.step_num == 2);
    CHECK(DerivedRows::IsDerived(s.track));
    CHECK(DerivedRows::DeviceOf(s.track) == s.device);
  }
  CHECK(DerivedRows::RowOf(out[0].track) == DerivedRows::Row::kSteps);
  CHECK(!DerivedRows::IsDerived(DerivedRows::kFirstDerivedTrack - 1));
  CHECK(DerivedRows::TrackOf(255, DerivedRows::Row::kMemory) == 8191);
}

TEST_CASE("derived rows: PyTorch's ProfilerStep#N spans are each GPU's Steps row, unless there are markers") {
  DerivedRows rows;
  std::vector<Event> out;
  rows.DefineName(7, "ProfilerStep#3");
  rows.DefineName(8, "aten::conv2d");
  rows.Define(4, TrackInfo{0, TrackType::kGpuStream, 7, 0});
  Event shifted = test::Span(100, 50, 7, 1);
  shifted.flags |= kFlagStepShift;  // a replay's second loop (replay.cc)
  shifted.payload.step.step_num = 4;
  rows.Derive({{test::Span(0, 90, 7, 1), test::Span(10, 20, 8, 1), shifted}}, &out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].track == DerivedRows::TrackOf(0, DerivedRows::Row::kSteps));
  CHECK(out[0].ts == 0);
  CHECK(out[0].name == 7);
  CHECK(out[1].ts == 100);
  CHECK((out[1].flags & kFlagStepShift) != 0);  // its number, as the pages read it: 3 + 4.
  CHECK(out[1].payload.step.step_num == 4);
  // Markers win (as steps.cc's sources): the spans are left out after one.
  rows.Derive({{Step(200, 100, 9), test::Span(300, 50, 7, 1)}}, &out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].kind == EventKind::kStepMarker);
}

TEST_CASE("derived rows: a GPU's memory in use, one sample per allocation and free of device memory") {
  DerivedRows rows;
  std::vector<Event> out;
  using test::Alloc;
  using test::Free;
  const std::vector<Event> in = {Alloc(10, 1, 0x1000, 500), Alloc(20, 1, 0x2000, 300, MemoryKind::kDevice, 2),
                Alloc(30, 1, 0x3000, 200),                       // device 0: 700
                Alloc(35, 1, 0x9000, 999, MemoryKind::kPinned),  // host memory: not a GPU's.
                Free(40, 1, 0x1000, 7),                          // its allocation's size: 200
                Free(50, 1, 0x7777, 50),                         // allocated before we saw it: ignored
                Alloc(60, 1, 0x3000, 1000),                      // again: 0x3000 was freed unseen, 1000
                Alloc(65, 1, 0, 40), Free(66, 1, 0, 1'000'000),  // no address: by size, never below 0
                Alloc(70, 1, 0x4000, 64, MemoryKind::kManaged, 2)};
  rows.Derive(in, &out);
  std::vector<std::pair<uint64_t, double>> dev0, dev2;
  for (const Event& c : out) {
    REQUIRE(c.kind == EventKind::kCounter);
    CHECK(c.dur == 0);
    CHECK(DerivedRows::RowOf(c.track) == DerivedRows::Row::kMemory);
    CHECK(DerivedRows::DeviceOf(c.track) == c.device);
    (c.device == 0 ? dev0 : dev2).emplace_back(c.ts, c.payload.counter.value);
  }
  using Samples = std::vector<std::pair<uint64_t, double>>;
  CHECK(dev0 == Samples{{10, 500}, {30, 700}, {40, 200}, {60, 1000}, {65, 1040}, {66, 0}});
  CHECK(dev2 == Samples{{20, 300}, {70, 364}});
}

TEST_CASE("derived rows: the store shows them, exports leave them out, and refuses their ids to producers") {
  TraceStore store;
  const std::vector<Event> defs = {TrackDefEvent(4, TrackInfo{0, TrackType::kGpuStream, 7, 0})};
  Event foreign = Step(0, 10, 0);
  foreign.track = DerivedRows::kFirstDerivedTrack + 3;
  store.Append(defs, {{Step(0, 1000, 1), Kernel(0, 4, 10, 100, 5), Kernel(0, 4, 200, 100, 6), foreign}});
  const TraceStore::Stats s = store.stats();
  CHECK(s.events == 3);
  CHECK(s.unstored_events == 1);
  const TraceQueryResult r = store.Query({{}, 0, 1000, 100});
  std::vector<TrackId> tracks;
  for (const auto& t : r.tracks) tracks.push_back(t.track);
  CHECK(tracks == std::vector<TrackId>{1, 4, DerivedRows::TrackOf(0, DerivedRows::Row::kSteps),
                                       DerivedRows::TrackOf(0, DerivedRows::Row::kFrameworkOps)});
  REQUIRE(r.tracks[3].slices.size() == 1);
  CHECK(r.tracks[3].slices[0].name == 5);  // op 6 is still open.
  size_t exported = 0;
  store.ForEach(0, 1000, {}, [&](StoredEventId, const Event& e) {
    ++exported;
    CHECK(!DerivedRows::IsDerived(e.track));
  });
  CHECK(exported == 3);
  // Asked for by id, a derived row is still not exported (a re-import would count steps twice).
  exported = 0;
  store.ForEach(0, 1000, {DerivedRows::TrackOf(0, DerivedRows::Row::kSteps)}, [&](StoredEventId, const Event&) { ++exported; });
  CHECK(exported == 0);
}

TEST_CASE("trace store: devices' descriptions, the latest per device, come first in every export") {
  TraceStore store;
  Event gpu0;
  gpu0.kind = EventKind::kDeviceInfo;
  gpu0.device = 0;
  gpu0.name = 1;
  Event gpu1 = gpu0;
  gpu1.device = 1;
  Event gpu0_again = gpu0;
  gpu0_again.name = 2;  // a replay's next loop describes it again
  store.Append({}, {{gpu0, gpu1, Step(10, 100, 1)}});
  store.Append({}, {{gpu0_again}});
  CHECK(store.stats().events == 1);  // descriptions are on no timeline
  CHECK(store.stats().first_ns == 10);
  std::vector<std::pair<StoredEventId, Event>> seen;
  store.ForEach(0, 1000, {1}, [&](StoredEventId id, const Event& e) { seen.emplace_back(id, e); });
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].first == kNoEventId);
  CHECK(seen[0].second.device == 0);
  CHECK(seen[0].second.name == 2);
  CHECK(seen[1].second.device == 1);
  CHECK(seen[2].second.kind == EventKind::kStepMarker);
  // Only descriptions: no time range yet (not a range of [UINT64_MAX, 0]).
  TraceStore only;
  only.Append({}, {{gpu0}});
  CHECK(only.stats().first_ns == 0);
  CHECK(only.stats().last_ns == 0);
}

}  // namespace
}  // namespace liveprof
