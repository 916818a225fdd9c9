// TraceStore against brute force: random nested host tracks and GPU streams,
// queried at many zooms; every event at least a pixel wide comes back with
// its exact depth, and every per-pixel summary is exact (count, busy,
// longest). Also: ids, search, ForEach, concurrent appends and queries.
#include "store/trace_store.h"

#include "aggregators/trace_samples.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace liveprof::trace_store_test {
namespace {

TEST_CASE("trace store: viewport queries equal brute force at every zoom") {
  size_t held = 0;
  for (uint64_t seed : {1, 2, 3}) {
    const Trace trace = MakeTrace(seed, 3, 30'000, 3'000);
    TraceStore store;
    // In batches, as the pipeline appends.
    AppendInBatches(store, trace, 777);
    CHECK(store.stats().events == trace.events.size());
    const std::vector<Event> all = WithDerived(trace.events);
    REQUIRE(all.size() > trace.events.size() + 1000);  // the GPU's Framework ops row.
    size_t memory_samples = 0;
    for (size_t i = trace.events.size(); i < all.size(); ++i) {
      memory_samples += DerivedRows::RowOf(all[i].track) == DerivedRows::Row::kMemory;
    }
    REQUIRE(memory_samples > 1'500);  // the GPU's Memory in use row (frees that come first are ignored).
    const uint64_t end = store.stats().last_ns;
    std::mt19937_64 rng(seed * 77);
    std::vector<TraceQuery> queries = {{{}, 0, end, 2000}, {{}, 0, end, 1}, {{}, end / 3, end / 3 + end / 50, 1500}};
    for (int i = 0; i < 30; ++i) {
      const uint64_t a = rng() % end, len = 1 + rng() % (end >> (rng() % 16));
      queries.push_back({{}, a, a + len, static_cast<uint32_t>(1 + rng() % 3000)});
    }
    for (const TraceQuery& q : queries) {
      CAPTURE(seed);
      CAPTURE(q.t0);
      CAPTURE(q.t1);
      CAPTURE(q.width_px);
      const TraceQueryResult got = store.Query(q);
      const TraceQueryResult want = BruteForce(all, q);
      ExpectSame(got, want);
      for (const auto& t : want.tracks) held += t.held;
    }
  }
  CHECK(held > 100);  // counter rows' levels at t0 (the counter track, the memory row), compared.
}

// 10 M events (1 M under ASan, whose run is ~10x slower and 3x the memory):
// the whole range, a middle and a deep zoom and random views, exact. Not
// "trace store: ...": the TSan suite's pattern would take it too.
TEST_CASE("store at 10 M events: viewport queries equal brute force") {
#if defined(LIVEPROF_SANITIZED_ADDRESS)
  constexpr size_t kEvents = 1'000'000;
#else
  constexpr size_t kEvents = 10'000'000;
#endif
  const Trace trace = MakeTrace(21, 4, kEvents);
  TraceStore store(InMemory(UINT64_MAX));
  AppendInBatches(store, trace, 4096);
  REQUIRE(store.stats().events == trace.events.size());
  const std::vector<Event> all = WithDerived(trace.events);
  const uint64_t end = store.stats().last_ns;
  std::mt19937_64 rng(21);
  std::vector<TraceQuery> queries = {{{}, 0, end, 2000},
                                     {{}, end / 2, end / 2 + end / 100, 2000},
                                     {{}, end / 3, end / 3 + 50'000, 2000},
                                     {{}, 0, 3'000'000, 1500}};
  for (int i = 0; i < 4; ++i) {
    const uint64_t a = rng() % end, len = 1 + rng() % (end >> (rng() % 20));
    queries.push_back({{}, a, a + len, static_cast<uint32_t>(1 + rng() % 3000)});
  }
  for (const TraceQuery& q : queries) {
    CAPTURE(q.t0);
    CAPTURE(q.t1);
    CAPTURE(q.width_px);
    ExpectSame(store.Query(q), BruteForce(all, q));
  }
}

TEST_CASE("trace store: the answer's size follows the screen, not the trace") {
  const Trace trace = MakeTrace(9, 2, 200'000);
  TraceStore store;
  store.Append(trace.defs, trace.events);
  const uint64_t end = store.stats().last_ns;
  for (const uint32_t width : {100u, 1000u}) {
    const TraceQueryResult r = store.Query({{}, 0, end, width});
    size_t items = 0;
    for (const auto& t : r.tracks) items += t.slices.size() + t.summaries.size();
    const uint64_t events = ProducerEvents(r);
    // One batch of 200 k events (thousands of chunks on a track): the index
    // above every one of them is up to date, so every event is counted once.
    CHECK(events == trace.events.size());
    CHECK(items < 4 * width + 2000);  // about a pixel row per track, plus the wide ones.
    // With many chunks to a pixel, most fold as whole nodes, undecoded.
    if (width == 100) CHECK(r.events_visited < trace.events.size() / 4);
  }
}

TEST_CASE("trace store: ids, payloads, search, ForEach and flows") {
  const Trace trace = MakeTrace(4, 1, 5'000);
  TraceStore store;
  store.Append(trace.defs, trace.events);
  // Every event comes back whole by id (ids: track, then arrival index).
  std::map<TrackId, uint64_t> index;
  for (const Event& e : trace.events) {
    const StoredEventId id = (uint64_t{e.track} << 40) | index[e.track]++;
    const std::optional<Event> got = store.Get(id);
    REQUIRE(got.has_value());
    CHECK(got->ts == e.ts);
    CHECK(got->dur == e.dur);
    CHECK(got->kind == e.kind);
    CHECK(got->corr == e.corr);
    CHECK(got->track == e.track);
    CHECK(got->payload.raw[0] == e.payload.raw[0]);
    CHECK(got->payload.raw[1] == e.payload.raw[1]);
  }
  CHECK(!store.Get((uint64_t{99} << 40) | 1).has_value());
  CHECK(store.Name(3) == "name_3");

  // Search: the next "name_7" after a time, and the previous one.
  const uint64_t from = store.stats().last_ns / 2;
  uint64_t next = UINT64_MAX, prev = 0;
  for (const Event& e : trace.events) {
    if (e.name != 7) continue;
    if (e.ts > from) next = std::min(next, e.ts);
    if (e.ts < from) prev = std::max(prev, e.ts);
  }
  const auto n = store.Search("name_7", from, true);
  REQUIRE(n.has_value());
  CHECK(n->second.ts == next);
  const auto p = store.Search("me_7", from, false);
  REQUIRE(p.has_value());
  CHECK(p->second.ts == prev);
  CHECK(!store.Search("no such name", 0, true).has_value());

  // ForEach: exactly the events overlapping the range.
  const uint64_t a = from, b = from + 20'000;
  size_t want = 0, got = 0;
  for (const Event& e : trace.events) want += !(e.ts > b || e.end() < a);
  store.ForEach(a, b, {}, [&](StoredEventId, const Event& e) {
    got += 1;
    CHECK(!(e.ts > b || e.end() < a));
  });
  CHECK(got == want);

  // Flows: every kernel in view whose launch is in view too; the others
  // lead from a slice to a far end (flow_ends: outside the view, or folded).
  const TraceQueryResult r = store.Query({{}, a, b, TraceStore::kMaxWidthPx});
  std::map<uint32_t, int> launches;
  std::set<StoredEventId> slices, far;
  size_t kernels_with_launch = 0;
  for (const auto& t : r.tracks) {
    for (const auto& s : t.slices)
      launches[s.corr] += s.kind == EventKind::kRuntimeApi && s.corr != 0, slices.insert(s.id);
  }
  for (const auto& t : r.tracks) {
    for (const auto& s : t.slices) kernels_with_launch += s.kind == EventKind::kKernel && launches[s.corr] > 0;
  }
  for (const auto& f : r.flow_ends) far.insert(f.id);
  size_t both = 0;
  for (const auto& f : r.flows) {
    if (slices.count(f.from) && slices.count(f.to)) {
      ++both;
    } else {
      CHECK(((slices.count(f.from) && far.count(f.to)) || (far.count(f.from) && slices.count(f.to))));
      const auto launch = store.Get(f.from), work = store.Get(f.to);
      REQUIRE(launch);
      REQUIRE(work);
      CHECK(launch->corr == work->corr);
      CHECK(launch->kind == EventKind::kRuntimeApi);
      CHECK(launch->ts <= work->ts);
    }
  }
  CHECK(both == kernels_with_launch);
}

TEST_CASE("trace store: past its byte budget the oldest chunks go, and it says so") {
  const Trace trace = MakeTrace(6, 2, 60'000);
  TraceStore store(InMemory(200'000));
  AppendInBatches(store, trace, 1000);
  const TraceStore::Stats s = store.stats();
  CHECK(s.events == trace.events.size());
  CHECK(s.dropped_events > trace.events.size() / 2);
  CHECK(s.dropped_until_ns > 0);
  // The budget, plus open chunks, the index and the mipmaps (~100 B per
  // chunk), and their blocks' room not filled yet (here ~40 KiB on a track
  // of ~200 chunks: the chunks' and the index's part-filled last blocks).
  CHECK(s.bytes < 200'000 + 64 * 1024 + s.chunks * 120 + store.Tracks().size() * 40 * 1024);
  // What is left is what queries see: every remaining event, once.
  const uint64_t seen = ProducerEvents(store.Query({{}, 0, s.last_ns + 1, 500}));
  CHECK(seen == s.events - s.dropped_events);
  CHECK(!store.Get(uint64_t{1} << 40).has_value());  // the very first event is gone.
  uint64_t foreach = 0;
  store.ForEach(0, s.last_ns, {}, [&](StoredEventId, const Event&) { ++foreach; });
  CHECK(foreach == seen);
}

TEST_CASE("trace store: past its budget, queries still equal brute force over the events kept") {
  // Freed chunks leave the index and the mipmaps: views at every zoom,
  // across where the oldest events went, fold exactly what is left.
  const Trace trace = MakeTrace(8, 3, 80'000, 4'000);
  TraceStore store(InMemory(150'000));
  AppendInBatches(store, trace, 1000);
  const TraceStore::Stats s = store.stats();
  REQUIRE(s.dropped_events > trace.events.size() / 3);
  // The events gone stay in their places (their ids), out of every view.
  std::vector<Event> kept = WithDerived(trace.events);
  std::map<TrackId, uint64_t> index;
  size_t gone = 0;
  for (Event& e : kept) {
    if (!store.Get((uint64_t{e.track} << 40) | index[e.track]++)) e.ts = UINT64_MAX / 2, e.dur = 0, ++gone;
  }
  REQUIRE(gone > trace.events.size() / 3);
  std::mt19937_64 rng(88);
  const uint64_t end = s.last_ns + 1, cut = s.dropped_until_ns;
  std::vector<TraceQuery> queries = {{{}, 0, end, 2000}, {{}, 0, end, 3}, {{}, cut / 2, cut + (end - cut) / 4, 700}};
  for (int i = 0; i < 40; ++i) {
    const uint64_t a = rng() % end, len = 1 + rng() % (end >> (rng() % 14));
    queries.push_back({{}, a, a + len, static_cast<uint32_t>(1 + rng() % 2500)});
  }
  for (const TraceQuery& q : queries) {
    CAPTURE(q.t0);
    CAPTURE(q.t1);
    CAPTURE(q.width_px);
    ExpectSame(store.Query(q), BruteForce(kept, q));
  }
}

TEST_CASE("trace store: grids at the clock's ends, and events longer than any pixel") {
  // Times near 0 and near 2^64, durations up to 2^63: the grid's shifts
  // and its end stay in range, and every event is where the definition says.
  std::vector<Event> events;
  std::mt19937_64 rng(64);
  auto add = [&](uint64_t ts, uint64_t dur) {
    Event e;
    e.kind = EventKind::kHostSpan;
    e.track = 1;
    e.ts = ts, e.dur = dur;
    e.name = static_cast<NameId>(1 + rng() % 5);
    events.push_back(e);
  };
  // (properly nested, as a thread's spans are)
  for (uint64_t i = 0; i < 3000; ++i) add(100 + i * 1000, rng() % 1000);  // near 0
  add(10, (uint64_t{1} << 63) + 40), add(20, (uint64_t{1} << 63) + 20), add(30, (uint64_t{1} << 62) + 15),
      add(40, uint64_t{1} << 62);
  const uint64_t top = UINT64_MAX - 5'000'000;
  for (uint64_t i = 0; i < 3000; ++i) add(top + i * 1000, rng() % 1000);  // near 2^64
  add(UINT64_MAX - 100, 100), add(UINT64_MAX, 0);
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
  TraceStore store;
  store.Append({}, events);
  const uint64_t half = uint64_t{1} << 63;
  for (const TraceQuery& q : std::vector<TraceQuery>{{{}, 0, UINT64_MAX, 1},
                                                     {{}, 0, UINT64_MAX, 2},
                                                     {{}, 5, UINT64_MAX, 4},
                                                     {{}, 0, half + 1, 2},
                                                     {{}, 0, half, 1},
                                                     {{}, UINT64_MAX - 2000, UINT64_MAX, 1000},
                                                     {{}, top - 7, UINT64_MAX, 65536},
                                                     {{}, 0, 4'000'000, 3000}}) {
    CAPTURE(q.t0);
    CAPTURE(q.t1);
    CAPTURE(q.width_px);
    const TraceQueryResult r = store.Query(q);
    CHECK(r.ns_per_px <= static_cast<double>(half));
    CHECK(r.width_px <= q.width_px + 2);
    CHECK(r.t1 > r.t0);
    ExpectSame(r, BruteForce(events, q));
  }
}

TEST_CASE("trace store: queries while the pipeline appends (run under TSan too)") {
  const Trace trace = MakeTrace(5, 2, 50'000);
  TraceStore store;
  store.Append(trace.defs, {});
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (size_t i = 0; i < trace.events.size(); i += 500) {
      store.Append({}, std::span<const Event>(trace.events.data() + i, std::min<size_t>(500, trace.events.size() - i)));
    }
    done = true;
  });
  uint64_t queries = 0, last_events = 0;
  while (!done || queries < 5) {
    const TraceStore::Stats s = store.stats();
    CHECK(s.events >= last_events);  // never goes back.
    last_events = s.events;
    CHECK(ProducerEvents(store.Query({{}, 0, s.last_ns + 1, 800})) <= trace.events.size());
    ++queries;
  }
  writer.join();
  CHECK(store.stats().events == trace.events.size());
}

// The walk lets a waiting Append in between chunks (trace_store.h,
// "Threads"): each query still counts every event appended before it began
// once, and none that was never appended; once the appends end, the answer
// is brute force's again.
TEST_CASE("trace store: a query that lets appends in counts each event once (run under TSan too)") {
  const Trace trace = MakeTrace(6, 3, 40'000);
  TraceStore store;
  store.Append(trace.defs, {});
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (size_t i = 0; i < trace.events.size(); i += 300) {
      store.Append({}, std::span<const Event>(trace.events.data() + i, std::min<size_t>(300, trace.events.size() - i)));
    }
    done = true;
  });
  uint64_t queries = 0;
  for (uint32_t width = 800; !done || queries < 6; width = width == 800 ? 65536 : 800) {
    const TraceStore::Stats before = store.stats();
    const uint64_t got = ProducerEvents(store.Query({{}, 0, before.last_ns + 1, width}));
    CHECK(got >= before.events);         // every event there before the query, at least once...
    CHECK(got <= store.stats().events);  // ...and none twice: at most those there after it.
    ++queries;
  }
  writer.join();
  const std::vector<Event> all = WithDerived(trace.events);
  const uint64_t end = store.stats().last_ns + 1;
  for (const TraceQuery& q :
       {TraceQuery{{}, 0, end, 800}, TraceQuery{{}, 0, end, 65536}, TraceQuery{{}, end / 2, end, 1000}}) {
    ExpectSame(store.Query(q), BruteForce(all, q));
  }
}

}  // namespace
}  // namespace liveprof::trace_store_test
