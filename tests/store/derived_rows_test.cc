// DerivedRows: each GPU's Steps and Framework ops rows, as xprof derives
// them (docs/semantics-tf.md §9.5), and the store keeping them apart
// from the producers' tracks.
#include "store/derived_rows.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "event_builder.h"
#include "store/device_steps.h"
#include "store/trace_store.h"

namespace liveprof::derived_rows_test {
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
  // The step ends: the open op 5 closes where it ended (its Steps span is
  // made once the device is done with the step: device_steps.h).
  rows.Derive({{Step(900, 400, 1), Kernel(0, 3, 1400, 10, 5)}}, &out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].track == DerivedRows::TrackOf(0, DerivedRows::Row::kFrameworkOps));
  CHECK(out[0].name == 5);
  CHECK(out[0].ts == 1200);
  CHECK(out[0].dur == 10);
  // The next step's op 5 is a new event; the step's span: its kernels, by time.
  rows.Flush(&out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].ts == 1400);
  CHECK(out[1].track == DerivedRows::TrackOf(0, DerivedRows::Row::kSteps));
  CHECK(out[1].ts == 1000);
  CHECK(out[1].dur == 410);
}

// Host steps of 1,000 ns from 0, on thread 1 (process 0); GPU 0's stream 4
// runs behind, GPU 1's stream 5 copies once. Launches: corr = step * 10 + i.
constexpr uint64_t kStepNs = 1000;
constexpr TrackId kThread = 1, kGpu0 = 4, kGpu1 = 5;

Event Work(EventKind kind, uint64_t ts, uint64_t dur, uint32_t corr, TrackId stream, uint8_t device) {
  Event e = test::Span(ts, dur, 99, stream, kind);
  e.corr = corr;
  e.device = device;
  return e;
}

// The Steps row events in `out`, as (step, device, ts, dur), in that order.
using Spans = std::vector<std::tuple<int64_t, int, uint64_t, uint64_t>>;
Spans StepSpans(const std::vector<Event>& out) {
  Spans spans;
  for (const Event& e : out) {
    if (DerivedRows::RowOf(e.track) != DerivedRows::Row::kSteps) continue;
    CHECK(e.track == DerivedRows::TrackOf(e.device, DerivedRows::Row::kSteps));
    CHECK(e.corr == 0);  // (no second arrow from a launch)
    spans.emplace_back(e.payload.step.step_num, e.device, e.ts, e.dur);
  }
  std::sort(spans.begin(), spans.end());
  return spans;
}

TEST_CASE("derived rows: a GPU's Steps row spans each step's own work on it, shifted when it runs behind") {
  DerivedRows rows;
  std::vector<Event> out;
  rows.Define(kThread, TrackInfo{0, TrackType::kHostThread, 1, 0});
  rows.Define(kGpu0, TrackInfo{0, TrackType::kGpuStream, 7, 0});
  rows.Define(kGpu1, TrackInfo{0, TrackType::kGpuStream, 8, 1});
  // Another process (its own correlation ids: 11 again) on GPU 2.
  rows.Define(7, TrackInfo{0, TrackType::kHostThread, 1, 0, 1});
  rows.Define(8, TrackInfo{0, TrackType::kGpuStream, 7, 2, 1});
  using test::Launch;
  // Step 1: launches 11 and 12; GPU 1 copies for 12 within it; a memset
  // with no launch (by time) before the step's marker comes.
  rows.Derive(
      {{Launch(100, 10, 11, 0, kThread), Work(EventKind::kMemset, 300, 20, 0, kGpu0, 0),
        Launch(900, 10, 12, 0, kThread), Work(EventKind::kMemcpyHtoD, 950, 50, 12, kGpu1, 1), Step(0, kStepNs, 1)}},
      &out);
  CHECK(StepSpans(out).empty());  // GPU 0 has not started step 1's kernels.
  // Step 2: GPU 0 runs step 1's kernels during it (from 800 to 1,900).
  rows.Derive({{Launch(1100, 10, 21, 0, kThread), Work(EventKind::kKernel, 800, 500, 11, kGpu0, 0),
                Work(EventKind::kKernel, 1300, 600, 12, kGpu0, 0), Step(kStepNs, kStepNs, 2)}},
              &out);
  CHECK(StepSpans(out).empty());  // (concurrent streams may still finish step 1's work)
  // Process 1's step, launch 11 and its kernel on GPU 2: its own.
  rows.Derive({{Launch(150, 10, 11, 0, 7), Work(EventKind::kKernel, 600, 50, 11, 8, 2), test::Step(100, 600, 1, 7)}},
              &out);
  CHECK(StepSpans(out).empty());
  // Step 3: step 2's kernel; then the device is on step 3: step 1 is made.
  rows.Derive({{Launch(2100, 10, 31, 0, kThread), Work(EventKind::kKernel, 1900, 700, 21, kGpu0, 0),
                Step(2 * kStepNs, kStepNs, 3), Launch(3100, 10, 41, 0, kThread),
                Work(EventKind::kKernel, 2600, 700, 31, kGpu0, 0)}},
              &out);
  // GPU 0: from the memset (300) to its last kernel's end (1,900), not the host's [0, 1,000).
  CHECK(StepSpans(out) == Spans{{1, 0, 300, 1600}, {1, 1, 950, 50}});
  for (const Event& e : out) {
    if (DerivedRows::RowOf(e.track) != DerivedRows::Row::kSteps) continue;
    CHECK(e.kind == EventKind::kStepMarker);  // the host step's, its name and number too.
  }
  rows.Derive({{Work(EventKind::kKernel, 3300, 200, 41, kGpu0, 0), Step(3 * kStepNs, kStepNs, 4)}}, &out);
  CHECK(StepSpans(out) == Spans{{2, 0, 1900, 700}});
  rows.Flush(&out);
  CHECK(StepSpans(out) == Spans{{1, 2, 600, 50}, {3, 0, 2600, 700}, {4, 0, 3300, 200}});
  CHECK(rows.late_step_work() == 0);
  // Work of a step made already is left out, and counted.
  rows.Derive({{Work(EventKind::kKernel, 3600, 10, 11, kGpu0, 0)}}, &out);
  CHECK(StepSpans(out).empty());
  CHECK(rows.late_step_work() == 1);
}

TEST_CASE("derived rows: a step long done is made at the watermark, and a host-only run has no device rows") {
  DerivedRows rows;
  std::vector<Event> out;
  rows.Derive({{Step(0, kStepNs, 1)}}, &out, 5 * DeviceSteps::kCloseLagNs);
  CHECK(out.empty());  // no GPU: no Steps row.
  rows.Define(kGpu0, TrackInfo{0, TrackType::kGpuStream, 7, 0});
  rows.Derive({{test::Launch(kStepNs + 10, 10, 7, 0, kThread), Work(EventKind::kKernel, kStepNs + 50, 100, 7, kGpu0, 0),
                Step(kStepNs, kStepNs, 2)}},
              &out, 2 * kStepNs);
  CHECK(StepSpans(out).empty());
  rows.Derive({}, &out, 2 * kStepNs + DeviceSteps::kCloseLagNs - 1);
  CHECK(StepSpans(out).empty());
  rows.Derive({}, &out, 2 * kStepNs + DeviceSteps::kCloseLagNs);
  CHECK(StepSpans(out) == Spans{{2, 0, kStepNs + 50, 100}});
}

TEST_CASE("derived rows: PyTorch's ProfilerStep#N spans are the steps, unless there are markers") {
  DerivedRows rows;
  std::vector<Event> out;
  rows.DefineName(7, "ProfilerStep#3");
  rows.DefineName(8, "aten::conv2d");
  rows.Define(kGpu0, TrackInfo{0, TrackType::kGpuStream, 7, 0});
  Event shifted = test::Span(100, 50, 7, kThread);
  shifted.flags |= kFlagStepShift;  // a replay's second loop (replay.cc)
  shifted.payload.step.step_num = 4;
  rows.Derive({{test::Launch(10, 5, 1, 0, kThread), test::Span(10, 20, 8, kThread), test::Span(0, 90, 7, kThread),
                test::Launch(110, 5, 2, 0, kThread), Work(EventKind::kKernel, 60, 80, 1, kGpu0, 0),
                Work(EventKind::kKernel, 140, 30, 2, kGpu0, 0), shifted}},
              &out);
  rows.Flush(&out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].track == DerivedRows::TrackOf(0, DerivedRows::Row::kSteps));
  CHECK(out[0].ts == 60);  // its kernel's, past the host span's end (90)
  CHECK(out[0].dur == 80);
  CHECK(out[0].name == 7);
  CHECK(out[0].kind == EventKind::kHostSpan);
  CHECK(out[1].ts == 140);
  CHECK((out[1].flags & kFlagStepShift) != 0);  // its number, as the pages read it: 3 + 4.
  CHECK(out[1].payload.step.step_num == 4);
  // Markers win (as steps.cc's sources): the spans are no steps after one.
  rows.Derive({{test::Launch(210, 5, 3, 0, kThread), Step(200, 100, 9), test::Launch(310, 5, 4, 0, kThread),
                test::Span(300, 50, 7, kThread), Work(EventKind::kKernel, 320, 40, 4, kGpu0, 0)}},
              &out);
  rows.Flush(&out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].kind == EventKind::kStepMarker);
  CHECK(out[0].ts == 320);  // by time: the marker's step holds what begins after it
}

TEST_CASE("derived rows: a GPU's memory in use, one sample per allocation and free of device memory") {
  DerivedRows rows;
  std::vector<Event> out;
  using test::Alloc;
  using test::Free;
  const std::vector<Event> in = {Alloc(10, 1, 0x1000, 500),
                                 Alloc(20, 1, 0x2000, 300, MemoryKind::kDevice, 2),
                                 Alloc(30, 1, 0x3000, 200),                       // device 0: 700
                                 Alloc(35, 1, 0x9000, 999, MemoryKind::kPinned),  // host memory: not a GPU's.
                                 Free(40, 1, 0x1000, 7),                          // its allocation's size: 200
                                 Free(50, 1, 0x7777, 50),                         // allocated before we saw it: ignored
                                 Alloc(60, 1, 0x3000, 1000),  // again: 0x3000 was freed unseen, 1000
                                 Alloc(65, 1, 0, 40),
                                 Free(66, 1, 0, 1'000'000),  // no address: by size, never below 0
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
  // (the kernels' corr is their start: launched at 5 and 150; the step made at the watermark)
  store.Append(defs,
               {{test::Launch(5, 1, 10), test::Launch(150, 1, 200), Step(0, 1000, 1), Kernel(0, 4, 10, 100, 5),
                 Kernel(0, 4, 200, 100, 6), foreign}},
               1000 + DeviceSteps::kCloseLagNs);
  const TraceStore::Stats s = store.stats();
  CHECK(s.events == 5);
  CHECK(s.unstored_events == 1);
  const TraceQueryResult r = store.Query({{}, 0, 1000, 100});
  std::vector<TrackId> tracks;
  for (const auto& t : r.tracks) tracks.push_back(t.track);
  CHECK(tracks == std::vector<TrackId>{1, 4, DerivedRows::TrackOf(0, DerivedRows::Row::kSteps),
                                       DerivedRows::TrackOf(0, DerivedRows::Row::kFrameworkOps)});
  REQUIRE(r.tracks[3].slices.size() == 1);
  CHECK(r.tracks[3].slices[0].name == 5);  // op 6 is still open.
  REQUIRE(r.tracks[2].slices.size() == 1);
  CHECK(r.tracks[2].slices[0].ts == 10);  // the step over the GPU's work: [10, 300)
  CHECK(r.tracks[2].slices[0].dur == 290);
  size_t exported = 0;
  store.ForEach(0, 1000, {}, [&](StoredEventId, const Event& e) {
    ++exported;
    CHECK(!DerivedRows::IsDerived(e.track));
  });
  CHECK(exported == 5);
  // Asked for by id, a derived row is still not exported (a re-import would count steps twice).
  exported = 0;
  store.ForEach(0, 1000, {DerivedRows::TrackOf(0, DerivedRows::Row::kSteps)},
                [&](StoredEventId, const Event&) { ++exported; });
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

// DeviceSteps' launch table against a brute-force reference, the
// std::unordered_map it replaced, on random operations: ids colliding and
// counting up; prunes of none, some and all; clears.
TEST_CASE("device steps: the launch table holds what a std::unordered_map would, on random operations") {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    std::mt19937_64 rng(seed);
    LaunchTable table;
    std::unordered_map<uint32_t, uint64_t> ref;
    table.TryEmplace(0, 1);  // 0 is "no correlation": not held.
    REQUIRE(table.size() == 0);
    REQUIRE(table.Find(0) == nullptr);
    uint64_t now = 1'000'000;
    uint32_t next = 1;
    const uint32_t range = seed % 2 == 0 ? 500 : 200'000;
    for (int i = 0; i < 200'000; ++i) {
      const uint64_t r = rng() % 1000;
      now += rng() % 100;
      if (r < 600) {  // insert: counting up or random (not 0: its callers' "none"); begins a little out of order.
        const uint32_t corr = r < 300 ? next++ : 1 + static_cast<uint32_t>(rng() % range);
        const uint64_t begin = now - rng() % 5'000;
        table.TryEmplace(corr, begin);
        ref.try_emplace(corr, begin);
      } else if (r < 995) {
        const uint32_t corr =
            rng() % 4 == 0 ? static_cast<uint32_t>(rng() % range) : next - static_cast<uint32_t>(rng() % 2'000);
        const auto it = ref.find(corr);
        const uint64_t* got = table.Find(corr);
        REQUIRE((got != nullptr) == (it != ref.end()));
        if (got != nullptr) CHECK(*got == it->second);
      } else if (r < 999) {
        const uint64_t t = now - rng() % 20'000;
        table.EraseBefore(t);
        std::erase_if(ref, [&](const auto& kv) { return kv.second < t; });
      } else {
        table.Clear();
        ref.clear();
      }
      REQUIRE(table.size() == ref.size());
      if (i % 1000 == 0) {
        uint64_t min_begin = UINT64_MAX;
        for (const auto& kv : ref) min_begin = std::min(min_begin, kv.second);
        CHECK(table.min_begin() <= min_begin);  // (a bound)
      }
    }
    for (const auto& [corr, begin] : ref) {  // every entry, at the end.
      const uint64_t* got = table.Find(corr);
      REQUIRE(got != nullptr);
      CHECK(*got == begin);
    }
  }
}

}  // namespace
}  // namespace liveprof::derived_rows_test
