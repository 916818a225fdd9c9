// TraceStore against brute force: random nested host tracks and GPU streams,
// queried at many zooms; every event at least a pixel wide comes back with
// its exact depth, and every per-pixel summary is exact (count, busy,
// longest). Also: ids, search, ForEach, concurrent appends and queries.
#include "aggregators/trace_store.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace liveprof {
namespace {

// A random trace: host tracks of properly nested spans (in completion
// order, as the pipeline delivers) and GPU tracks of back-to-back kernels.
struct Trace {
  std::vector<Event> defs, events;
  std::vector<std::string> names;
};

void Nest(std::mt19937_64& rng, uint64_t begin, uint64_t end, int depth, TrackId track, std::vector<Event>* out) {
  uint64_t at = begin;
  while (at < end) {
    const uint64_t gap = rng() % 50;
    const uint64_t len = 1 + rng() % std::max<uint64_t>(1, (end - begin) / (depth == 0 ? 3 : 2));
    if (at + gap + len > end) break;
    Event e;
    e.kind = rng() % 5 == 0 ? EventKind::kRuntimeApi : EventKind::kHostSpan;
    e.ts = at + gap;
    e.dur = len;
    e.track = track;
    e.name = static_cast<NameId>(1 + rng() % 20);
    e.corr = e.kind == EventKind::kRuntimeApi ? static_cast<uint32_t>(1 + rng() % 5000) : 0;
    if (depth < 5 && len > 20) Nest(rng, e.ts, e.end(), depth + 1, track, out);  // children first.
    out->push_back(e);
    at = e.end();
  }
}

Trace MakeTrace(uint64_t seed, size_t host_tracks, size_t gpu_events) {
  std::mt19937_64 rng(seed);
  Trace t;
  for (NameId n = 0; n <= 20; ++n) t.names.push_back(n == 0 ? "" : "name_" + std::to_string(n));
  // (after: a definition points into its string, which must not move again)
  for (NameId n = 0; n <= 20; ++n) t.defs.push_back(NameDefEvent(n, t.names[n]));
  for (size_t h = 0; h < host_tracks; ++h) Nest(rng, 0, 2'000'000, 0, static_cast<TrackId>(1 + h), &t.events);
  uint64_t at = 0;
  for (size_t i = 0; i < gpu_events; ++i) {
    Event k;
    k.kind = EventKind::kKernel;
    k.ts = at + rng() % 300;
    k.dur = 1 + rng() % (i % 97 == 0 ? 20000 : 400);
    k.track = static_cast<TrackId>(1 + host_tracks);
    k.device = 1;
    k.name = static_cast<NameId>(1 + rng() % 20);
    k.corr = static_cast<uint32_t>(1 + rng() % 5000);
    k.payload.kernel.details = static_cast<NameId>(rng() % 20);
    k.payload.kernel.op = static_cast<NameId>(rng() % 20);
    t.events.push_back(k);
    at = k.end();
  }
  // Completion order, as the pipeline gives it.
  std::stable_sort(t.events.begin(), t.events.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
  return t;
}

// The events with the rows the store derives from them (derived_rows.h),
// as one pass over all of them: the store's batches must not change them.
std::vector<Event> WithDerived(const std::vector<Event>& events) {
  DerivedRows rows;
  std::vector<Event> all = events, derived;
  rows.Derive(events, &derived);
  all.insert(all.end(), derived.begin(), derived.end());
  return all;
}

// Events a query result holds on the producers' tracks (slices and folded).
uint64_t ProducerEvents(const TraceQueryResult& r) {
  uint64_t n = 0;
  for (const auto& t : r.tracks) {
    if (DerivedRows::IsDerived(t.track)) continue;
    n += t.slices.size();
    for (const auto& p : t.summaries) n += p.count;
  }
  return n;
}

// The query's definition, event by event.
TraceQueryResult BruteForce(const std::vector<Event>& events, const TraceQuery& q) {
  TraceQueryResult r;
  const uint64_t span = q.t1 - q.t0;
  std::map<TrackId, std::vector<size_t>> by_track;
  for (size_t i = 0; i < events.size(); ++i) by_track[events[i].track].push_back(i);
  for (const auto& [track, idx] : by_track) {
    TraceQueryResult::Track out;
    out.track = track;
    std::map<uint32_t, TraceQueryResult::Summary> px;
    std::map<uint32_t, uint64_t> sums;
    for (size_t n = 0; n < idx.size(); ++n) {
      const Event& e = events[idx[n]];
      if (e.ts > q.t1 || e.end() < q.t0) continue;
      if (static_cast<unsigned __int128>(e.dur) * q.width_px >= span) {
        TraceQueryResult::Slice s;
        s.id = (uint64_t{track} << 40) | n;
        s.ts = e.ts, s.dur = e.dur, s.name = e.name, s.kind = e.kind, s.corr = e.corr;
        // Depth: the returned events of the track that contain it.
        out.slices.push_back(s);
        continue;
      }
      const uint64_t at = std::clamp(e.ts, q.t0, q.t1) - q.t0;
      const auto p = static_cast<uint32_t>(std::min<uint64_t>(
          static_cast<uint64_t>(static_cast<unsigned __int128>(at) * q.width_px / span), q.width_px - 1));
      auto& s = px[p];
      if (s.count == 0 || e.dur > s.longest_dur || (e.dur == s.longest_dur && e.name < s.longest)) {
        s.longest_dur = e.dur, s.longest = e.name;
      }
      s.px = p;
      ++s.count;
      sums[p] += e.dur;
    }
    for (auto& s : out.slices) {
      int depth = 0;
      for (const auto& o : out.slices) {
        const bool contains = o.ts <= s.ts && o.ts + o.dur >= s.ts + s.dur && o.id != s.id &&
                              (o.dur > s.dur || (o.dur == s.dur && o.ts < s.ts) ||
                               (o.dur == s.dur && o.ts == s.ts && o.id < s.id));
        depth += contains;
      }
      s.depth = static_cast<uint8_t>(depth);
    }
    for (auto& [p, s] : px) {
      s.busy = std::min(1.0, static_cast<double>(sums[p]) * q.width_px / static_cast<double>(span));
      out.summaries.push_back(s);
    }
    r.tracks.push_back(std::move(out));
  }
  return r;
}

// The store's answer against brute force: the same slices with the same
// depths, every folded pixel exact.
void ExpectSame(const TraceQueryResult& got, const TraceQueryResult& want) {
  REQUIRE(got.tracks.size() == want.tracks.size());
  for (size_t t = 0; t < want.tracks.size(); ++t) {
    const auto& g = got.tracks[t];
    const auto& w = want.tracks[t];
    CHECK(g.track == w.track);
    // Slices: the same set, with the same depths.
    std::map<StoredEventId, const TraceQueryResult::Slice*> gs, ws;
    for (const auto& s : g.slices) gs[s.id] = &s;
    for (const auto& s : w.slices) ws[s.id] = &s;
    REQUIRE(gs.size() == ws.size());
    for (const auto& [id, s] : ws) {
      REQUIRE(gs.count(id) == 1);
      CHECK(gs[id]->ts == s->ts);
      CHECK(gs[id]->dur == s->dur);
      CHECK(gs[id]->depth == s->depth);
    }
    REQUIRE(g.summaries.size() == w.summaries.size());
    for (size_t i = 0; i < w.summaries.size(); ++i) {
      CHECK(g.summaries[i].px == w.summaries[i].px);
      CHECK(g.summaries[i].count == w.summaries[i].count);
      CHECK(g.summaries[i].busy == w.summaries[i].busy);
      CHECK(g.summaries[i].longest_dur == w.summaries[i].longest_dur);
      CHECK(g.summaries[i].longest == w.summaries[i].longest);
    }
  }
}

TEST_CASE("trace store: viewport queries equal brute force at every zoom") {
  for (uint64_t seed : {1, 2, 3}) {
    const Trace trace = MakeTrace(seed, 3, 30'000);
    TraceStore store;
    // In batches, as the pipeline appends.
    for (size_t i = 0; i < trace.events.size(); i += 777) {
      const size_t n = std::min<size_t>(777, trace.events.size() - i);
      store.Append(i == 0 ? std::span<const Event>(trace.defs) : std::span<const Event>(),
                   std::span<const Event>(trace.events.data() + i, n));
    }
    CHECK(store.stats().events == trace.events.size());
    const std::vector<Event> all = WithDerived(trace.events);
    REQUIRE(all.size() > trace.events.size() + 1000);  // the GPU's Framework ops row.
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
    }
  }
}

// 10 M events (1 M under ASan, whose run is ~10x slower and 3x the memory):
// the whole range, a middle and a deep zoom and random views, exact. Not
// "trace store: ...": the TSan suite's pattern would take it too.
TEST_CASE("store at 10 M events: viewport queries equal brute force") {
#if defined(__SANITIZE_ADDRESS__)
  constexpr size_t kEvents = 1'000'000;
#else
  constexpr size_t kEvents = 10'000'000;
#endif
  const Trace trace = MakeTrace(21, 4, kEvents);
  TraceStore store(TraceStore::Options{.max_bytes = UINT64_MAX});
  for (size_t i = 0; i < trace.events.size(); i += 4096) {
    store.Append(i == 0 ? std::span<const Event>(trace.defs) : std::span<const Event>(),
                 std::span<const Event>(trace.events.data() + i, std::min<size_t>(4096, trace.events.size() - i)));
  }
  REQUIRE(store.stats().events == trace.events.size());
  const std::vector<Event> all = WithDerived(trace.events);
  const uint64_t end = store.stats().last_ns;
  std::mt19937_64 rng(21);
  std::vector<TraceQuery> queries = {{{}, 0, end, 2000}, {{}, end / 2, end / 2 + end / 100, 2000},
                                     {{}, end / 3, end / 3 + 50'000, 2000}, {{}, 0, 3'000'000, 1500}};
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

  // Flows: every kernel in view whose launch is in view too.
  const TraceQueryResult r = store.Query({{}, a, b, TraceStore::kMaxWidthPx});
  std::map<uint32_t, int> launches;
  size_t kernels_with_launch = 0;
  for (const auto& t : r.tracks) {
    for (const auto& s : t.slices) launches[s.corr] += s.kind == EventKind::kRuntimeApi && s.corr != 0;
  }
  for (const auto& t : r.tracks) {
    for (const auto& s : t.slices) kernels_with_launch += s.kind == EventKind::kKernel && launches[s.corr] > 0;
  }
  CHECK(r.flows.size() == kernels_with_launch);
}

TEST_CASE("trace store: past its byte budget the oldest chunks go, and it says so") {
  const Trace trace = MakeTrace(6, 2, 60'000);
  TraceStore store(TraceStore::Options{.max_bytes = 200'000});
  for (size_t i = 0; i < trace.events.size(); i += 1000) {
    store.Append(i == 0 ? std::span<const Event>(trace.defs) : std::span<const Event>(),
                 std::span<const Event>(trace.events.data() + i, std::min<size_t>(1000, trace.events.size() - i)));
  }
  const TraceStore::Stats s = store.stats();
  CHECK(s.events == trace.events.size());
  CHECK(s.dropped_events > trace.events.size() / 2);
  CHECK(s.dropped_until_ns > 0);
  CHECK(s.bytes < 200'000 + 64 * 1024);  // the budget, plus open chunks and the index.
  // What is left is what queries see: every remaining event, once.
  const uint64_t seen = ProducerEvents(store.Query({{}, 0, s.last_ns + 1, 500}));
  CHECK(seen == s.events - s.dropped_events);
  CHECK(!store.Get(uint64_t{1} << 40).has_value());  // the very first event is gone.
  uint64_t foreach = 0;
  store.ForEach(0, s.last_ns, {}, [&](StoredEventId, const Event&) { ++foreach; });
  CHECK(foreach == seen);
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

}  // namespace
}  // namespace liveprof
