// What the trace viewer's navigation asks of the store (trace_store_find.cc
// and the query's nesting): slices stacked by nesting, not by overlap; a row
// per counter name; search stepping through equal starts, with the count of
// matches; flows whose other end is outside the view.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "event_builder.h"
#include "store/derived_rows.h"
#include "store/trace_store.h"
#include "stream/stream.h"

namespace liveprof::trace_store_find_test {
namespace {

using Slice = TraceQueryResult::Slice;

Slice At(StoredEventId id, uint64_t ts, uint64_t dur) {
  Slice s;
  s.id = id, s.ts = ts, s.dur = dur;
  return s;
}

// The depth by definition: the longest chain of slices each containing the
// next (a slice contains another if it starts no later and ends no earlier,
// and comes first in the store's order: by start, the longer first, by id).
std::vector<int> BruteDepths(std::vector<Slice> v) {
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.dur != b.dur ? a.dur > b.dur : a.id < b.id;
  });
  std::vector<int> depth(v.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    for (size_t p = 0; p < i; ++p) {
      const bool ends_at_start = v[p].ts + v[p].dur == v[i].ts && v[i].dur != 0;
      if (v[p].ts + v[p].dur >= v[i].ts + v[i].dur && !ends_at_start) depth[i] = std::max(depth[i], depth[p] + 1);
    }
  }
  return depth;
}

TEST_CASE("nesting: back-to-back ops overlapping by a rounding share a lane, nested ones stack") {
  // 40 ops, each ending 1 ns after the next starts (a Framework ops row of
  // a launch-bound phase): the old stack stepped each one down a lane.
  std::vector<Slice> v;
  for (uint64_t i = 0; i < 40; ++i) v.push_back(At(i, 1000 + i * 100, 101));
  NestSlices(&v);
  for (const Slice& s : v) CHECK(s.depth == 0);
  // A parent around three children, one child with a grandchild, a sibling
  // that only overlaps the first child's end.
  std::vector<Slice> w = {At(1, 0, 1000), At(2, 10, 100),  At(3, 20, 10),
                          At(4, 105, 50), At(5, 200, 300), At(6, 500, 0)};
  NestSlices(&w);
  std::vector<int> got;
  for (const Slice& s : w) got.push_back(s.depth);
  CHECK(got == std::vector<int>{0, 1, 2, 1, 1, 2});  // (the instant at 500 sits in [200, 500])
  // Random rows: the depth is the definition's.
  uint64_t seed = 7;
  auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33; };
  for (int round = 0; round < 50; ++round) {
    std::vector<Slice> r;
    for (StoredEventId id = 0; id < 60; ++id) r.push_back(At(id, next() % 2000, next() % 3 == 0 ? 0 : next() % 400));
    const std::vector<int> want = BruteDepths(r);
    NestSlices(&r);
    for (size_t i = 0; i < r.size(); ++i) {
      CAPTURE(round);
      CAPTURE(i);
      CHECK(int{r[i].depth} == want[i]);
    }
  }
}

// A store with named tracks: host thread 1, a GPU stream 2.
struct Store {
  std::vector<std::string> names;
  TraceStore store;
  explicit Store(std::vector<std::string> n) : names(std::move(n)) {
    std::vector<Event> defs;
    for (NameId i = 0; i < names.size(); ++i) defs.push_back(NameDefEvent(i, names[i]));
    defs.push_back(TrackDefEvent(1, TrackInfo{0, TrackType::kHostThread, 11, 0}));
    defs.push_back(TrackDefEvent(2, TrackInfo{0, TrackType::kGpuStream, 7, 0}));
    store.Append(defs, {});
  }
};

TEST_CASE("counter rows: each counter name recorded on a thread gets a counter row of its own") {
  Store s({"", "loss", "lr", "work"});
  std::vector<Event> events = {test::Span(0, 5000, 3, 1)};
  for (int i = 0; i < 200; ++i) {
    events.push_back(test::Counter(10 + i * 20, 1, 4.0 - i * 0.01, 1));
    if (i % 2 == 0) events.push_back(test::Counter(15 + i * 20, 2, 0.1 * i, 1));
  }
  s.store.Append({}, events);
  const TrackId loss = DerivedRows::CounterTrack(0), lr = DerivedRows::CounterTrack(1);
  bool seen_loss = false, seen_lr = false;
  for (const auto& track : s.store.Tracks()) {
    if (track.first != loss && track.first != lr) continue;
    (track.first == loss ? seen_loss : seen_lr) = true;
    CHECK(track.second.type == TrackType::kCounter);
    CHECK(track.second.name == (track.first == loss ? 1u : 2u));
  }
  CHECK(seen_loss);
  CHECK(seen_lr);
  // Its samples' values, per pixel: the last and the largest; held before the view.
  const TraceQueryResult r = s.store.Query({{loss}, 1024, 3072, 64});  // 32 ns a pixel, from 1024.
  REQUIRE(r.tracks.size() == 1);
  REQUIRE(r.t0 == 1024);
  const auto& t = r.tracks[0];
  CHECK(t.held);
  CHECK(t.held_ts == 1010);
  CHECK(t.held_value == doctest::Approx(3.5));
  uint64_t samples = 0;
  for (const auto& f : t.summaries) {
    samples += f.count;
    const uint64_t ts = r.t0 + f.px * static_cast<uint64_t>(r.ns_per_px);
    const int last =
        static_cast<int>((ts + static_cast<uint64_t>(r.ns_per_px) - 1 - 10) / 20);  // the pixel's last sample.
    CHECK(f.last_value == doctest::Approx(4.0 - last * 0.01));
  }
  CHECK(samples == 103);  // 1030 .. 3070.
  // The thread keeps its samples (exports, the event's details), and the count of events is the producers'.
  CHECK(s.store.stats().events == events.size());
  // Search finds each sample once: on its thread.
  CHECK(s.store.CountMatches("loss", 0, 0).total == 200);
  const auto found = s.store.Search("loss", 0, true);
  REQUIRE(found);
  CHECK(found->second.track == 1);
  // A counter-typed track's samples are not copied: it is a row already.
  Store c({"", "queue"});
  c.store.Append({{TrackDefEvent(3, TrackInfo{1, TrackType::kCounter, 0, 0})}}, {{test::Counter(5, 1, 2.0, 3)}});
  for (const auto& track : c.store.Tracks()) CHECK(!DerivedRows::IsCounterRow(track.first));
}

TEST_CASE("counter rows: a run folder read back names its counter rows by their samples") {
  std::string dir = (std::filesystem::temp_directory_path() / "liveprof-counters-XXXXXX").string();
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  TraceStore::Options o;
  o.dir = dir + "/run";
  std::vector<std::string> names = {"", "loss", "lr", "work"};
  {
    TraceStore store(o);
    std::string error;
    REQUIRE(store.Create(&error));
    std::vector<Event> defs;
    for (NameId i = 0; i < names.size(); ++i) defs.push_back(NameDefEvent(i, names[i]));
    defs.push_back(TrackDefEvent(1, TrackInfo{3, TrackType::kHostThread, 11, 0}));
    std::vector<Event> events;
    for (int i = 0; i < 100; ++i) events.push_back(test::Counter(10 + i * 20, i % 2 == 0 ? 1 : 2, i, 1));
    store.Append(defs, events);
  }
  TraceStore reopened(o);
  std::string error;
  REQUIRE(reopened.Open(&error));
  std::vector<std::pair<TrackId, NameId>> rows;
  for (const auto& track : reopened.Tracks()) {
    if (DerivedRows::IsCounterRow(track.first)) rows.emplace_back(track.first, track.second.name);
  }
  CHECK(rows ==
        std::vector<std::pair<TrackId, NameId>>{{DerivedRows::CounterTrack(0), 1}, {DerivedRows::CounterTrack(1), 2}});
  const TraceQueryResult r = reopened.Query({{DerivedRows::CounterTrack(1)}, 0, 4096, 4096});
  REQUIRE(r.tracks.size() == 1);
  uint64_t samples = 0;
  for (const auto& f : r.tracks[0].summaries) {
    samples += f.count;
    CHECK(static_cast<int>(f.last_value) % 2 == 1);  // lr's samples: the odd ones.
  }
  CHECK(samples == 50);
  CHECK(reopened.stats().events == 100);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST_CASE("search: equal starts are stepped through by id, the matches are counted with the hit's place") {
  Store s({"", "conv_op", "conv_kernel", "other"});
  std::vector<Event> events;
  for (uint64_t i = 0; i < 30; ++i) {
    events.push_back(test::Span(i * 100, 50, 1, 1));       // conv_op at i*100
    events.push_back(test::Kernel(i * 100, 40, 2, 0, 2));  // conv_kernel at the same start
    events.push_back(test::Span(i * 100 + 60, 10, 3, 1));  // other
  }
  s.store.Append({}, events);
  // Forward from the start, by (ts, id): every match once, in order.
  std::vector<StoredEventId> seen;
  uint64_t from = 0;
  std::optional<StoredEventId> from_id = 0;
  while (auto hit = s.store.Search("conv", from, true, {}, from_id)) {
    const TraceStore::MatchCount c = s.store.CountMatches("conv", hit->second.ts, hit->first);
    CHECK(c.total == 60);
    CHECK(c.before == seen.size());  // its place: "k of N" with k = before + 1.
    seen.push_back(hit->first);
    from = hit->second.ts, from_id = hit->first;
    REQUIRE(seen.size() <= 60);
  }
  CHECK(seen.size() == 60);
  // Back from the last: the same, reversed.
  std::vector<StoredEventId> back;
  from = UINT64_MAX, from_id = std::nullopt;
  while (auto hit = s.store.Search("conv", from, false, {}, from_id)) {
    back.push_back(hit->first);
    from = hit->second.ts, from_id = hit->first;
    REQUIRE(back.size() <= 60);
  }
  std::reverse(back.begin(), back.end());
  CHECK(back == seen);
  // Without an id, as before: strictly after the start.
  const auto after = s.store.Search("conv", 100, true);
  REQUIRE(after);
  CHECK(after->second.ts == 200);
  CHECK(s.store.CountMatches("nothing", 0, 0).total == 0);
}

TEST_CASE("flows: a slice whose launch or kernel is outside the view gets its flow and the far end") {
  Store s({"", "cudaLaunchKernel", "gemm"});
  std::vector<Event> events;
  // Launches at 1 ms steps, each kernel 300 us after its launch.
  for (uint32_t i = 0; i < 20; ++i) {
    events.push_back(test::Launch(1'000'000 + i * 1'000'000ull, 5'000, 100 + i, 1, 1));
    events.push_back(test::Kernel(1'300'000 + i * 1'000'000ull, 200'000, 2, 100 + i, 2));
  }
  s.store.Append({}, events);
  // A view from just after launch 5 to just after it: kernel 5 in view, its
  // launch before; launch 6 in view, its kernel after.
  const TraceQueryResult r = s.store.Query({{}, 6'200'000, 7'100'000, 2000});
  const auto id_of = [&](TrackId track, uint64_t ts) -> StoredEventId {
    for (const auto& t : r.tracks) {
      for (const auto& sl : t.slices) {
        if (t.track == track && sl.ts == ts) return sl.id;
      }
    }
    return kNoEventId;
  };
  const StoredEventId kernel5 = id_of(2, 6'300'000), launch6 = id_of(1, 7'000'000);
  REQUIRE(kernel5 != kNoEventId);
  REQUIRE(launch6 != kNoEventId);
  REQUIRE(r.flow_ends.size() == 2);
  const auto& far_launch = r.flow_ends[0].track == 1 ? r.flow_ends[0] : r.flow_ends[1];
  const auto& far_kernel = r.flow_ends[0].track == 1 ? r.flow_ends[1] : r.flow_ends[0];
  CHECK(far_launch.ts == 6'000'000);
  CHECK(far_launch.kind == EventKind::kRuntimeApi);
  CHECK(far_launch.name == 1);
  CHECK(far_kernel.ts == 7'300'000);
  CHECK(far_kernel.dur == 200'000);
  CHECK(far_kernel.kind == EventKind::kKernel);
  CHECK(s.store.Get(far_launch.id)->ts == 6'000'000);
  CHECK(s.store.Get(far_kernel.id)->corr == 106);
  const auto has = [&](StoredEventId a, StoredEventId b) {
    return std::any_of(r.flows.begin(), r.flows.end(), [&](const auto& f) { return f.from == a && f.to == b; });
  };
  CHECK(has(far_launch.id, kernel5));
  CHECK(has(launch6, far_kernel.id));
  CHECK(r.flows.size() == 2);
  // Both ends in view: a flow, no far end.
  const TraceQueryResult both = s.store.Query({{}, 5'900'000, 6'600'000, 2000});
  CHECK(both.flow_ends.empty());
  CHECK(both.flows.size() == 1);
}

// Each far end a query gives is checked against every event (ForEach): the
// nearest of its correlation id within reach, when there is one. Many
// chunks of other ids lie between (the walk skips nodes and chunks by their
// ids' range), ids repeat (two processes), and the same store is read back
// from its run folder (the ranges from the chunks' heads).
void CheckFarEnds(const TraceStore& store, uint64_t last_ns) {
  std::vector<std::pair<StoredEventId, Event>> all;
  store.ForEach(0, UINT64_MAX, {}, [&](StoredEventId id, const Event& e) {
    if (id != kNoEventId) all.emplace_back(id, e);
  });
  std::mt19937_64 rng(5);
  size_t checked = 0;
  for (int q = 0; q < 40; ++q) {
    const uint64_t t0 = rng() % last_ns, t1 = t0 + 1 + rng() % 300'000;
    const TraceQueryResult r = store.Query({{}, t0, t1, 2000});
    std::map<uint32_t, int> ends;  // corr -> 1 launch, 2 work, 3 both, among the slices.
    for (const auto& t : r.tracks) {
      for (const auto& s : t.slices) {
        if (s.corr != 0) ends[s.corr] |= s.kind == EventKind::kRuntimeApi ? 1 : IsDeviceKind(s.kind) ? 2 : 0;
      }
    }
    for (const auto& t : r.tracks) {
      for (const auto& s : t.slices) {
        if (s.corr == 0 || ends[s.corr] == 3 || (s.kind != EventKind::kRuntimeApi && !IsDeviceKind(s.kind))) continue;
        const bool launch = s.kind == EventKind::kRuntimeApi;  // its work is after it, else its launch before.
        std::optional<std::pair<StoredEventId, uint64_t>> nearest;
        for (const auto& [id, e] : all) {
          if (e.corr != s.corr || (launch ? !IsDeviceKind(e.kind) : e.kind != EventKind::kRuntimeApi)) continue;
          const uint64_t gap = launch ? e.ts - s.ts : s.ts - e.ts;
          if ((launch ? e.ts < s.ts : e.ts > s.ts) || gap > TraceQueryResult::kFlowReachNs) continue;
          if (!nearest || gap < nearest->second) nearest.emplace(id, gap);
        }
        if (!nearest) continue;
        const bool has = std::any_of(r.flows.begin(), r.flows.end(), [&](const auto& f) {
          return launch ? f.from == s.id && f.to == nearest->first : f.from == nearest->first && f.to == s.id;
        });
        CHECK(has);
        const bool listed = std::any_of(r.flow_ends.begin(), r.flow_ends.end(),
                                        [&](const auto& fe) { return fe.id == nearest->first; });
        CHECK(listed);
        ++checked;
      }
    }
  }
  CHECK(checked > 20);
}

TEST_CASE("flows: far ends are the nearest of their id, past chunks of other ids, read back too") {
  std::string dir = (std::filesystem::temp_directory_path() / "liveprof-flows-XXXXXX").string();
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  TraceStore::Options o;
  o.dir = dir + "/run";
  std::mt19937_64 rng(11);
  std::vector<Event> events;
  uint64_t last_ns = 0;
  for (uint32_t i = 0; i < 6'000; ++i) {  // two processes: ids 1.. on threads 1-2, again on thread 3.
    const uint32_t corr = 1 + (i % 3 == 2 ? i / 3 : i - i / 3);
    const uint64_t ts = 1'000'000 + uint64_t{i} * 20'000 + rng() % 10'000;
    const TrackId host = static_cast<TrackId>(1 + i % 3);
    events.push_back(test::Launch(ts, 3'000, corr, 1, host));
    events.push_back(test::Span(ts + 4'000, 2'000, 2, host));  // a host span, no id.
    const uint64_t lag = 5'000 + rng() % 70'000'000;           // some past the reach
    events.push_back(test::Kernel(ts + lag, 1'000 + rng() % 5'000, 2, corr, static_cast<TrackId>(10 + i % 2)));
    last_ns = std::max(last_ns, ts + lag);
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
  {
    TraceStore store(o);
    std::string error;
    REQUIRE(store.Create(&error));
    for (size_t i = 0; i < events.size(); i += 500) {
      store.Append({}, std::span<const Event>(events.data() + i, std::min<size_t>(500, events.size() - i)));
    }
    CheckFarEnds(store, last_ns);
  }
  TraceStore reopened(o);
  std::string error;
  REQUIRE(reopened.Open(&error));
  CheckFarEnds(reopened, last_ns);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace liveprof::trace_store_find_test

namespace liveprof::trace_store_find_test {
namespace {

TEST_CASE("area sums: every event in the area per name, sub-pixel ones too, with self time less the children's") {
  Store s({"", "step", "op", "tiny", "kern"});
  std::vector<Event> events;
  // 3 steps of 1000 ns on thread 1, each with an op of 400 and 100 tiny events of 2 ns inside the op.
  for (uint64_t k = 0; k < 3; ++k) {
    events.push_back(test::Span(k * 1000, 1000, 1, 1));
    events.push_back(test::Span(k * 1000 + 100, 400, 2, 1));
    for (uint64_t i = 0; i < 100; ++i) events.push_back(test::Span(k * 1000 + 110 + i * 3, 2, 3, 1));
    events.push_back(test::Kernel(k * 1000 + 200, 50, 4, 0, 2));
  }
  events.push_back(test::Counter(10, 0, 5.0, 1));  // a counter sample: not an event of the area.
  s.store.Append({}, events);
  const TraceStore::AreaSums all = s.store.SumArea(0, 3000, {}, 1'000'000);
  CHECK(!all.truncated);
  CHECK(all.tracks == 2);
  CHECK(all.events == 3 * 103);
  auto find = [](const TraceStore::AreaSums& a, NameId n) {
    for (const auto& x : a.names)
      if (x.name == n) return x;
    return TraceStore::AreaSums::Name{};
  };
  CHECK(all.names.front().name == 1);  // the longest total first.
  CHECK(find(all, 1).count == 3);
  CHECK(find(all, 1).total == 3000);
  CHECK(find(all, 1).self == 3 * 600);          // less the op.
  CHECK(find(all, 2).self == 3 * (400 - 200));  // less its 100 tiny events.
  CHECK(find(all, 3).count == 300);
  CHECK(find(all, 3).self == 600);
  CHECK(find(all, 4).count == 3);
  CHECK(find(all, 4).max == 50);
  // Only the GPU stream, only the second step's time: overlapping events count whole.
  const TraceStore::AreaSums one = s.store.SumArea(1150, 1250, {2}, 1'000'000);
  CHECK(one.events == 1);
  CHECK(find(one, 4).total == 50);
  const TraceStore::AreaSums thread = s.store.SumArea(1150, 1250, {1}, 1'000'000);
  CHECK(find(thread, 3).count == 34);  // starts 1110 + 3i, i = 13 (ends 1151) .. 46 (starts 1248).
  CHECK(find(thread, 1).count == 1);
  // A cap stops the walk and says so.
  const TraceStore::AreaSums capped = s.store.SumArea(0, 3000, {}, 50);
  CHECK(capped.truncated);
  CHECK(capped.events <= 50);
}

}  // namespace
}  // namespace liveprof::trace_store_find_test
