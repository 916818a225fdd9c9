// Random traces for the trace store's tests and the query's definition,
// event by event, to check the store's answers against (brute force).
#ifndef LIVEPROF_TESTS_AGGREGATORS_TRACE_SAMPLES_H_
#define LIVEPROF_TESTS_AGGREGATORS_TRACE_SAMPLES_H_

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "store/derived_rows.h"
#include "store/trace_store.h"

namespace liveprof {

inline TraceStore::Options InMemory(uint64_t max_bytes) {
  TraceStore::Options o;
  o.max_bytes = max_bytes;
  return o;
}

// The counter-typed track of MakeTrace's counter samples (a counter row).
inline constexpr TrackId kCounterTrack = 100;

// Counter rows (trace_store.h): counter-typed tracks, GPUs' Memory in use.
inline bool IsCounterRow(TrackId id) {
  return id == kCounterTrack || (DerivedRows::IsDerived(id) && (DerivedRows::RowOf(id) == DerivedRows::Row::kMemory ||
                                                                DerivedRows::RowOf(id) == DerivedRows::Row::kCounter));
}

// A random trace: host tracks of properly nested spans (in completion
// order, as the pipeline delivers) and GPU tracks of back-to-back kernels.
struct Trace {
  std::vector<Event> defs, events;
  std::vector<std::string> names;
};

inline void Nest(std::mt19937_64& rng, uint64_t begin, uint64_t end, int depth, TrackId track,
                 std::vector<Event>* out) {
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

// With `memory_events` > 0: as many device allocations and frees on the
// first host track (the GPU's Memory in use row), and as many samples of a
// counter on a counter track of its own (values of either sign).
inline Trace MakeTrace(uint64_t seed, size_t host_tracks, size_t gpu_events, size_t memory_events = 0) {
  std::mt19937_64 rng(seed);
  Trace t;
  for (NameId n = 0; n <= 20; ++n) t.names.push_back(n == 0 ? "" : "name_" + std::to_string(n));
  // (after: a definition points into its string, which must not move again)
  for (NameId n = 0; n <= 20; ++n) t.defs.push_back(NameDefEvent(n, t.names[n]));
  if (memory_events > 0) t.defs.push_back(TrackDefEvent(kCounterTrack, TrackInfo{3, TrackType::kCounter, 0, 0}));
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
  std::vector<std::pair<uint64_t, uint64_t>> live;  // address, bytes.
  for (size_t i = 0; i < memory_events; ++i) {
    Event m;
    m.ts = rng() % std::max<uint64_t>(at, 1);
    m.track = 1;
    m.device = 1;
    m.sub = static_cast<uint8_t>(MemoryKind::kDevice);
    if (live.empty() || rng() % 2 == 0) {
      m.kind = EventKind::kAlloc;
      m.payload.memory = {0x1000 + i * 64, 1 + rng() % 100'000};
      live.emplace_back(m.payload.memory.address, m.payload.memory.bytes);
    } else {
      m.kind = EventKind::kFree;
      const size_t k = rng() % live.size();
      m.payload.memory = {live[k].first, rng() % 2 == 0 ? live[k].second : 0};
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
    t.events.push_back(m);
    Event c;
    c.kind = EventKind::kCounter;
    c.ts = rng() % std::max<uint64_t>(at, 1);
    c.track = kCounterTrack;
    c.name = 3;
    c.payload.counter.value = static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000) / 8;
    t.events.push_back(c);
  }
  // Completion order, as the pipeline gives it.
  std::stable_sort(t.events.begin(), t.events.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
  return t;
}

// The events with the rows the store derives from them (derived_rows.h),
// as one pass over all of them: the store's batches must not change them.
// `stopped`: with the ops held open at the end too (a store's clean stop
// writes them to its run folder).
inline std::vector<Event> WithDerived(const std::vector<Event>& events, bool stopped = false) {
  DerivedRows rows;
  rows.Define(kCounterTrack, TrackInfo{3, TrackType::kCounter, 0, 0});  // as MakeTrace defines it: a row already.
  std::vector<Event> all = events, derived;
  rows.Derive(events, &derived);
  all.insert(all.end(), derived.begin(), derived.end());
  if (stopped) {
    rows.Flush(&derived);
    all.insert(all.end(), derived.begin(), derived.end());
  }
  return all;
}

// Events a query result holds on the producers' tracks (slices and folded).
inline uint64_t ProducerEvents(const TraceQueryResult& r) {
  uint64_t n = 0;
  for (const auto& t : r.tracks) {
    if (DerivedRows::IsDerived(t.track)) continue;
    n += t.slices.size();
    for (const auto& p : t.summaries) n += p.count;
  }
  return n;
}

// The query's grid (trace_store.h): pixels of B = 2^k ns, the least B with
// B * width >= t1 - t0, from t0 rounded down to a multiple of B, as many as
// reach t1.
// (B at most 2^63; t1 at most UINT64_MAX.)
inline void Grid(const TraceQuery& q, TraceQueryResult* r) {
  uint64_t b = 1;
  while (static_cast<unsigned __int128>(b) * q.width_px < q.t1 - q.t0 && b < (uint64_t{1} << 63)) b *= 2;
  r->t0 = q.t0 - q.t0 % b;
  r->width_px = static_cast<uint32_t>((q.t1 - 1 - r->t0) / b + 1);
  const unsigned __int128 t1 = r->t0 + static_cast<unsigned __int128>(r->width_px) * b;
  r->t1 = t1 > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(t1);
  r->ns_per_px = static_cast<double>(b);
}

// The query's definition, event by event: events at least a pixel wide
// that overlap the view, each; the others that start in it, folded into
// the pixel of their start.
inline TraceQueryResult BruteForce(const std::vector<Event>& events, const TraceQuery& q) {
  TraceQueryResult r;
  Grid(q, &r);
  const auto b = static_cast<uint64_t>(r.ns_per_px);
  std::map<TrackId, std::vector<size_t>> by_track;
  for (size_t i = 0; i < events.size(); ++i) by_track[events[i].track].push_back(i);
  for (const auto& [track, idx] : by_track) {
    TraceQueryResult::Track out;
    out.track = track;
    std::map<uint32_t, TraceQueryResult::Summary> px;
    std::map<uint32_t, uint64_t> sums;
    for (size_t n = 0; n < idx.size(); ++n) {
      const Event& e = events[idx[n]];
      // A counter row's sample in force at t0: the latest before it.
      if (IsCounterRow(track) && e.kind == EventKind::kCounter && e.ts < r.t0 && (!out.held || e.ts >= out.held_ts)) {
        out.held = true, out.held_ts = e.ts, out.held_value = e.payload.counter.value;
      }
      if (e.ts >= r.t1 || e.end() < r.t0) continue;
      if (e.dur >= b) {
        if (e.end() == r.t0) continue;  // ends where the view begins.
        TraceQueryResult::Slice s;
        s.id = (uint64_t{track} << 40) | n;
        s.ts = e.ts, s.dur = e.dur, s.name = e.name, s.kind = e.kind, s.corr = e.corr;
        // Depth: the returned events of the track that contain it.
        out.slices.push_back(s);
        continue;
      }
      if (e.ts < r.t0) continue;  // starts before the view: in no pixel of it.
      const auto p = static_cast<uint32_t>((e.ts - r.t0) / b);
      auto& s = px[p];
      if (s.count == 0 || e.dur > s.longest_dur || (e.dur == s.longest_dur && e.name < s.longest)) {
        s.longest_dur = e.dur, s.longest = e.name;
      }
      const double value = e.kind == EventKind::kCounter ? e.payload.counter.value : 0;
      s.max_value = s.count == 0 ? value : std::max(s.max_value, value);
      s.last_value = value;  // arrival order.
      s.px = p;
      ++s.count;
      sums[p] += e.dur;
    }
    for (auto& s : out.slices) {
      int depth = 0;
      for (const auto& o : out.slices) {
        const bool contains =
            o.ts <= s.ts && o.ts + o.dur >= s.ts + s.dur && o.id != s.id &&
            (o.dur > s.dur || (o.dur == s.dur && o.ts < s.ts) || (o.dur == s.dur && o.ts == s.ts && o.id < s.id));
        depth += contains;
      }
      s.depth = static_cast<uint8_t>(depth);
    }
    for (auto& [p, s] : px) {
      s.busy = std::min(1.0, static_cast<double>(sums[p]) / static_cast<double>(b));
      out.summaries.push_back(s);
    }
    r.tracks.push_back(std::move(out));
  }
  return r;
}

// The store's answer against brute force: the same slices with the same
// depths, every folded pixel exact.
inline void ExpectSame(const TraceQueryResult& got, const TraceQueryResult& want) {
  CHECK(got.t0 == want.t0);
  CHECK(got.t1 == want.t1);
  CHECK(got.width_px == want.width_px);
  CHECK(got.ns_per_px == want.ns_per_px);
  REQUIRE(got.tracks.size() == want.tracks.size());
  for (size_t t = 0; t < want.tracks.size(); ++t) {
    const auto& g = got.tracks[t];
    const auto& w = want.tracks[t];
    CHECK(g.track == w.track);
    CHECK(g.held == w.held);
    CHECK(g.held_ts == w.held_ts);
    CHECK(g.held_value == w.held_value);
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
      CHECK(g.summaries[i].max_value == w.summaries[i].max_value);
      CHECK(g.summaries[i].last_value == w.summaries[i].last_value);
    }
  }
}

// Appends `trace` in batches of `batch` events, the definitions first.
inline void AppendInBatches(TraceStore& store, const Trace& trace, size_t batch) {
  for (size_t i = 0; i < trace.events.size(); i += batch) {
    store.Append(i == 0 ? std::span<const Event>(trace.defs) : std::span<const Event>(),
                 std::span<const Event>(trace.events.data() + i, std::min(batch, trace.events.size() - i)));
  }
}

}  // namespace liveprof

#endif  // LIVEPROF_TESTS_AGGREGATORS_TRACE_SAMPLES_H_
