#include "aggregators/trace_store.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace liveprof {
namespace {

constexpr uint64_t kIndexBits = 40;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

uint64_t GetVarint(const char*& p) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const auto b = static_cast<uint8_t>(*p++);
    v |= uint64_t{b & 0x7fu} << shift;
    if (b < 0x80) return v;
  }
}

uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// The longer wins; between equals, the smaller name (any order gives the same).
bool Longer(uint64_t dur, NameId name, uint64_t than_dur, NameId than_name) {
  return dur > than_dur || (dur == than_dur && name < than_name);
}

}  // namespace

// What a chunk or a node of chunks holds, for the query's walk.
struct TraceStore::Node {
  uint64_t min_start = UINT64_MAX, max_start = 0;
  uint64_t min_end = UINT64_MAX, max_end = 0;
  uint64_t max_dur = 0, sum_dur = 0;
  uint32_t count = 0;
  NameId longest = 0;

  void Add(uint64_t start, uint64_t dur, NameId name) {
    if (count == 0 || Longer(dur, name, max_dur, longest)) max_dur = dur, longest = name;
    min_start = std::min(min_start, start);
    max_start = std::max(max_start, start);
    min_end = std::min(min_end, start + dur);
    max_end = std::max(max_end, start + dur);
    sum_dur += dur;
    ++count;
  }
  void Add(const Node& o) {
    if (o.count == 0) return;
    if (count == 0 || Longer(o.max_dur, o.longest, max_dur, longest)) max_dur = o.max_dur, longest = o.longest;
    min_start = std::min(min_start, o.min_start);
    max_start = std::max(max_start, o.max_start);
    min_end = std::min(min_end, o.min_end);
    max_end = std::max(max_end, o.max_end);
    sum_dur += o.sum_dur;
    count += o.count;
  }
};

// Up to kChunkEvents events as varint columns (see the header).
struct TraceStore::Chunk {
  std::string ends, durs, names, kinds, corrs, payload;
  uint64_t last_end = 0;   // the encoder's state: deltas from these.
  uint32_t last_corr = 0;
  uint64_t name_bits = 0;  // one bit per name id mod 64: Search skips chunks.
  uint32_t count = 0;

  void Put(const Event& e) {
    const uint64_t end = e.ts + e.dur;
    PutVarint(&ends, ZigZag(static_cast<int64_t>(end - last_end)));
    last_end = end;
    PutVarint(&durs, e.dur);
    PutVarint(&names, e.name);
    kinds.push_back(static_cast<char>(e.kind));
    PutVarint(&kinds, uint64_t{e.sub} | uint64_t{e.flags} << 8 | uint64_t{e.device} << 16);
    PutVarint(&corrs, ZigZag(static_cast<int64_t>(e.corr) - static_cast<int64_t>(last_corr)));
    last_corr = e.corr;
    if (e.kind == EventKind::kKernel) {
      PutVarint(&payload, e.payload.kernel.details);
      PutVarint(&payload, e.payload.kernel.context);
      PutVarint(&payload, e.payload.kernel.graph_id);
      PutVarint(&payload, e.payload.kernel.op);
    } else if (e.kind == EventKind::kCounter) {
      char raw[8];
      std::memcpy(raw, &e.payload.counter.value, 8);
      payload.append(raw, 8);
    } else {
      PutVarint(&payload, e.payload.raw[0]);
      PutVarint(&payload, e.payload.raw[1]);
    }
    name_bits |= uint64_t{1} << (e.name & 63);
    ++count;
  }

  // Decodes the first `n` events (all by default) into `out` (track unset);
  // only their times and names when `times_only`.
  void Decode(std::vector<Event>* out, uint32_t n = UINT32_MAX, bool times_only = false) const {
    n = std::min(n, count);
    out->resize(n);
    const char *pe = ends.data(), *pd = durs.data(), *pn = names.data(), *pk = kinds.data(), *pc = corrs.data(),
               *pp = payload.data();
    uint64_t end = 0;
    uint32_t corr = 0;
    for (uint32_t i = 0; i < n; ++i) {
      Event& e = (*out)[i];
      end += static_cast<uint64_t>(UnZigZag(GetVarint(pe)));
      e.dur = GetVarint(pd);
      e.ts = end - e.dur;
      e.name = static_cast<NameId>(GetVarint(pn));
      if (times_only) continue;
      e.kind = static_cast<EventKind>(*pk++);
      const uint64_t extra = GetVarint(pk);
      e.sub = static_cast<uint8_t>(extra);
      e.flags = static_cast<uint8_t>(extra >> 8);
      e.device = static_cast<uint8_t>(extra >> 16);
      corr = static_cast<uint32_t>(static_cast<int64_t>(corr) + UnZigZag(GetVarint(pc)));
      e.corr = corr;
      e.payload.raw[0] = e.payload.raw[1] = 0;
      if (e.kind == EventKind::kKernel) {
        e.payload.kernel.details = static_cast<NameId>(GetVarint(pp));
        e.payload.kernel.context = static_cast<uint32_t>(GetVarint(pp));
        e.payload.kernel.graph_id = static_cast<uint32_t>(GetVarint(pp));
        e.payload.kernel.op = static_cast<NameId>(GetVarint(pp));
      } else if (e.kind == EventKind::kCounter) {
        std::memcpy(&e.payload.counter.value, pp, 8);
        pp += 8;
      } else {
        e.payload.raw[0] = GetVarint(pp);
        e.payload.raw[1] = GetVarint(pp);
      }
    }
  }

  void Seal() {
    for (std::string* s : {&ends, &durs, &names, &kinds, &corrs, &payload}) s->shrink_to_fit();
  }
  uint64_t Bytes() const {
    return sizeof(Chunk) + ends.capacity() + durs.capacity() + names.capacity() + kinds.capacity() +
           corrs.capacity() + payload.capacity();
  }
};

// One level of a track's index: nodes by absolute position j (node j of
// level k covers chunks j*16^k .. (j+1)*16^k - 1), the first `base` of them
// gone with the chunks the retention rule freed.
struct TraceStore::Level {
  std::deque<Node> nodes;
  uint64_t base = 0;
  uint64_t end() const { return base + nodes.size(); }
  Node& at(uint64_t j) { return nodes[j - base]; }
  const Node& at(uint64_t j) const { return nodes[j - base]; }
};

// One track: its chunks (the last one open; chunk j is chunks[j - base])
// and the index over them: levels[0] summarises the chunks, levels[k] nodes
// of 16 nodes of levels[k - 1].
struct TraceStore::TrackStore {
  std::deque<Chunk> chunks;
  std::vector<Level> levels{1};
  uint64_t events = 0;
  uint64_t dirty_from = UINT64_MAX;  // the first chunk changed since the last Reindex.

  uint64_t base() const { return levels[0].base; }
  const Chunk& chunk(uint64_t j) const { return chunks[j - base()]; }

  // Adds `e`; true when that sealed the chunk before it (now full).
  bool Append(const Event& e) {
    bool sealed = false;
    if (chunks.empty() || chunks.back().count == kChunkEvents) {
      if (!chunks.empty()) chunks.back().Seal(), sealed = true;
      chunks.emplace_back();
      levels[0].nodes.emplace_back();
    }
    chunks.back().Put(e);
    levels[0].nodes.back().Add(e.ts, e.dur, e.name);
    ++events;
    dirty_from = std::min(dirty_from, levels[0].end() - 1);
    return sealed;
  }

  // Node j of level k from its children that are left.
  Node Combine(size_t k, uint64_t j) const {
    const Level& below = levels[k - 1];
    Node n;
    for (uint64_t c = std::max(j * kFanout, below.base); c < std::min((j + 1) * kFanout, below.end()); ++c) {
      n.Add(below.at(c));
    }
    return n;
  }

  // Frees the first chunk (sealed); the index above it follows. Returns
  // its event count.
  uint64_t FreeFront() {
    const uint64_t freed = chunks.front().count;
    chunks.pop_front();
    levels[0].nodes.pop_front();
    ++levels[0].base;
    for (size_t k = 1; k < levels.size(); ++k) {
      Level& level = levels[k];
      if (level.nodes.empty()) break;
      if (levels[k - 1].base >= (level.base + 1) * kFanout) {  // all its children gone.
        level.nodes.pop_front();
        ++level.base;
      } else {
        level.at(level.base) = Combine(k, level.base);
      }
    }
    return freed;
  }

  // Brings the upper levels up to date with level 0: the nodes above the
  // chunks changed since the last call (a batch may fill many chunks).
  void Reindex() {
    if (dirty_from == UINT64_MAX) return;
    uint64_t dirty = dirty_from;
    for (size_t k = 1; levels[k - 1].end() > 1; ++k) {
      if (levels.size() == k) levels.emplace_back();
      Level& level = levels[k];
      dirty /= kFanout;
      const uint64_t want = (levels[k - 1].end() + kFanout - 1) / kFanout;
      while (level.end() < want) level.nodes.emplace_back();
      for (uint64_t j = std::max(level.base, dirty); j < want; ++j) level.at(j) = Combine(k, j);
    }
    dirty_from = UINT64_MAX;
  }
};

TraceStore::TraceStore(Options options) : options_(options) {}
TraceStore::~TraceStore() = default;

TraceStore::TrackStore& TraceStore::Track(TrackId id) {
  if (id >= tracks_.size()) tracks_.resize(size_t{id} + 1);
  if (!tracks_[id]) tracks_[id] = std::make_unique<TrackStore>();
  return *tracks_[id];
}

const TraceStore::TrackStore* TraceStore::FindTrack(TrackId id) const {
  return id < tracks_.size() ? tracks_[id].get() : nullptr;
}

void TraceStore::Append(std::span<const Event> definitions, std::span<const Event> events) {
  std::unique_lock lock(mu_);
  for (const Event& d : definitions) {
    if (d.kind == EventKind::kNameDef) {
      if (d.name >= names_.size()) names_.resize(size_t{d.name} + 1);
      name_text_.emplace_back(d.payload.name_def.data, d.payload.name_def.size);
      names_[d.name] = name_text_.back();
    } else if (d.kind == EventKind::kTrackDef && d.track < DerivedRows::kFirstDerivedTrack) {
      if (d.track >= track_info_.size()) track_info_.resize(size_t{d.track} + 1);
      track_info_[d.track] = TrackInfo{d.name, d.payload.track_def.type, d.payload.track_def.os_tid, d.device};
      derived_.Define(d.track, track_info_[d.track]);
    }
  }
  TrackStore* last = nullptr;
  TrackId last_id = 0;
  std::vector<TrackStore*> touched;
  auto put = [&](const Event& e) {
    if (last == nullptr || e.track != last_id) {
      last = &Track(e.track);
      last_id = e.track;
    }
    if (last->dirty_from == UINT64_MAX) touched.push_back(last);  // its first event of the batch.
    if (last->Append(e)) {
      sealed_bytes_ += last->chunks[last->chunks.size() - 2].Bytes();
      sealed_.push_back(last_id);
    }
  };
  for (const Event& e : events) {
    if (e.kind == EventKind::kDeviceInfo) {  // a description, not on a timeline: the latest per device.
      const auto same = std::find_if(device_info_.begin(), device_info_.end(),
                                     [&](const Event& d) { return d.device == e.device; });
      if (same == device_info_.end()) {
        device_info_.push_back(e);
      } else {
        *same = e;
      }
      continue;
    }
    if (e.track >= DerivedRows::kFirstDerivedTrack) {
      ++unstored_events_;
      continue;
    }
    put(e);
    ++events_;
    first_ns_ = std::min(first_ns_, e.ts);
    last_ns_ = std::max(last_ns_, e.end());
  }
  derived_.Derive(events, &derived_events_);
  for (const Event& e : derived_events_) put(e);
  for (TrackStore* t : touched) t->Reindex();
  Retain();
}

void TraceStore::Retain() {
  // A track's chunks seal in order, so the oldest sealed chunk of the
  // track named first is its front one.
  while (sealed_bytes_ > options_.max_bytes && !sealed_.empty()) {
    const TrackId sealed_track = sealed_.front();
    TrackStore& t = *tracks_[sealed_track];
    sealed_.pop_front();
    sealed_bytes_ -= t.chunks.front().Bytes();
    dropped_until_ns_ = std::max(dropped_until_ns_, t.levels[0].nodes.front().max_end);
    const uint64_t freed = t.FreeFront();
    if (!DerivedRows::IsDerived(sealed_track)) dropped_events_ += freed;
  }
}

void TraceStore::QueryTrack(const TrackStore& t, TrackId id, const TraceQuery& q, TraceQueryResult::Track* out,
                            uint64_t* visited) const {
  const uint64_t span = q.t1 - q.t0;
  const uint32_t width = q.width_px;
  // Integer pixel arithmetic (exact, whatever the zoom).
  const uint64_t no_overflow = UINT64_MAX / width;  // at * width fits 64 bits below this.
  auto px_of = [&](uint64_t start) {
    const uint64_t at = std::clamp(start, q.t0, q.t1) - q.t0;
    const uint64_t px = at < no_overflow ? at * width / span
                                         : static_cast<uint64_t>((static_cast<unsigned __int128>(at) * width) / span);
    return static_cast<uint32_t>(std::min<uint64_t>(px, width - 1));
  };
  // dur * width >= span, as one compare.
  const uint64_t min_wide = span / width + (span % width != 0);
  auto wide = [&](uint64_t dur) { return dur >= min_wide; };
  // The pixel of the last start seen and the starts it covers, [lo, hi):
  // consecutive events mostly share a pixel, and then need no division.
  uint32_t last_px = 0;
  uint64_t lo = 1, hi = 0;
  auto px_cached = [&](uint64_t start) {
    if (start >= lo && start < hi) return last_px;
    last_px = px_of(start);
    // Pixel p holds the offsets `at` with at * width / span == p.
    auto first_at = [&](uint64_t p) {
      const auto v = static_cast<unsigned __int128>(p) * span;
      return static_cast<uint64_t>(v / width + (v % width != 0));
    };
    lo = last_px == 0 ? 0 : q.t0 + first_at(last_px);
    hi = last_px + 1 == width ? UINT64_MAX : q.t0 + first_at(last_px + 1);
    return last_px;
  };
  struct Fold {
    uint32_t count = 0;
    uint64_t sum = 0, longest_dur = 0;
    NameId longest = 0;
  };
  thread_local std::vector<Fold> folds;  // by pixel.
  folds.assign(width, Fold{});
  auto fold = [&](uint32_t px, uint32_t count, uint64_t sum, uint64_t dur, NameId name) {
    Fold& f = folds[px];
    if (f.count == 0 || Longer(dur, name, f.longest_dur, f.longest)) f.longest_dur = dur, f.longest = name;
    f.count += count;
    f.sum += sum;
  };
  thread_local std::vector<Event> decoded;
  // Top down: fold a node whole into one pixel when it can, else go down.
  auto visit = [&](auto&& self, size_t level, uint64_t j) -> void {
    const Node& n = t.levels[level].at(j);
    if (n.count == 0 || n.min_start > q.t1 || n.max_end < q.t0) return;
    if (n.min_end >= q.t0 && n.max_start <= q.t1 && !wide(n.max_dur)) {
      // All its starts in one pixel: [lo, hi) of its first start's pixel
      // (cached: nodes come in time order, mostly in the pixel before).
      const uint32_t p = px_cached(n.min_start);
      if (n.max_start < hi) {
        fold(p, n.count, n.sum_dur, n.max_dur, n.longest);
        return;
      }
    }
    if (level > 0) {
      const Level& below = t.levels[level - 1];
      for (uint64_t c = std::max(j * kFanout, below.base); c < std::min(below.end(), (j + 1) * kFanout); ++c) {
        self(self, level - 1, c);
      }
      return;
    }
    t.chunk(j).Decode(&decoded, UINT32_MAX, /*times_only=*/!wide(n.max_dur));
    *visited += decoded.size();
    for (uint32_t i = 0; i < decoded.size(); ++i) {
      const Event& e = decoded[i];
      if (e.ts > q.t1 || e.end() < q.t0) continue;
      if (wide(e.dur)) {
        TraceQueryResult::Slice s;
        s.id = (uint64_t{id} << kIndexBits) | (uint64_t{j} * kChunkEvents + i);
        s.ts = e.ts;
        s.dur = e.dur;
        s.name = e.name;
        s.corr = e.corr;
        s.kind = e.kind;
        out->slices.push_back(s);
      } else {
        fold(px_cached(e.ts), 1, e.dur, e.dur, e.name);
      }
    }
  };
  const size_t top = t.levels.size() - 1;
  for (uint64_t j = t.levels[top].base; j < t.levels[top].end(); ++j) visit(visit, top, j);
  // Nesting among the returned slices: by start, the longer first.
  std::sort(out->slices.begin(), out->slices.end(), [](const auto& a, const auto& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.dur != b.dur ? a.dur > b.dur : a.id < b.id;
  });
  std::vector<uint64_t> open_ends;
  for (auto& s : out->slices) {
    while (!open_ends.empty() && open_ends.back() <= s.ts && !(s.dur == 0 && open_ends.back() == s.ts)) {
      open_ends.pop_back();
    }
    s.depth = static_cast<uint8_t>(std::min<size_t>(open_ends.size(), 255));
    open_ends.push_back(s.ts + s.dur);
  }
  for (uint32_t px = 0; px < width; ++px) {
    const Fold& f = folds[px];
    if (f.count == 0) continue;
    const double busy = static_cast<double>(f.sum) * width / static_cast<double>(span);
    out->summaries.push_back({px, f.count, std::min(1.0, busy), f.longest, f.longest_dur});
  }
}

TraceQueryResult TraceStore::Query(const TraceQuery& q) const {
  TraceQueryResult r;
  r.t0 = q.t0;
  r.t1 = q.t1;
  r.width_px = q.width_px;
  if (q.t1 <= q.t0 || q.width_px == 0 || q.width_px > kMaxWidthPx) return r;
  r.ns_per_px = static_cast<double>(q.t1 - q.t0) / q.width_px;
  std::shared_lock lock(mu_);
  std::vector<TrackId> ids = q.tracks;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) {
    for (TrackId id = 0; id < tracks_.size(); ++id) {
      if (tracks_[id]) ids.push_back(id);
    }
  }
  for (const TrackId id : ids) {
    const TrackStore* t = FindTrack(id);
    if (t == nullptr) continue;
    r.tracks.emplace_back();
    r.tracks.back().track = id;
    QueryTrack(*t, id, q, &r.tracks.back(), &r.events_visited);
  }
  // Launch -> device work, both in the view.
  std::unordered_map<uint32_t, StoredEventId> launch;
  for (const auto& t : r.tracks) {
    for (const auto& s : t.slices) {
      if (s.kind == EventKind::kRuntimeApi && s.corr != 0) launch.emplace(s.corr, s.id);
    }
  }
  for (const auto& t : r.tracks) {
    for (const auto& s : t.slices) {
      if (!IsDeviceKind(s.kind) || s.corr == 0) continue;
      if (const auto it = launch.find(s.corr); it != launch.end()) r.flows.push_back({it->second, s.id});
    }
  }
  return r;
}

std::optional<Event> TraceStore::Get(StoredEventId id) const {
  std::shared_lock lock(mu_);
  const TrackStore* t = FindTrack(static_cast<TrackId>(id >> kIndexBits));
  const uint64_t index = id & kIndexMask;
  if (t == nullptr || index >= t->events) return std::nullopt;
  thread_local std::vector<Event> decoded;
  if (index / kChunkEvents < t->base()) return std::nullopt;  // freed by the retention rule.
  const Chunk& c = t->chunk(index / kChunkEvents);
  c.Decode(&decoded, static_cast<uint32_t>(index % kChunkEvents) + 1);
  Event e = decoded.back();
  e.track = static_cast<TrackId>(id >> kIndexBits);
  return e;
}

std::optional<std::pair<StoredEventId, Event>> TraceStore::Search(std::string_view text, uint64_t from, bool forward,
                                                                  const std::vector<TrackId>& tracks) const {
  std::shared_lock lock(mu_);
  std::vector<bool> match(names_.size(), false);
  uint64_t bits = 0;
  for (NameId n = 0; n < names_.size(); ++n) {
    if (!text.empty() && names_[n].find(text) != std::string_view::npos) match[n] = true, bits |= uint64_t{1} << (n & 63);
  }
  if (bits == 0) return std::nullopt;
  std::optional<std::pair<StoredEventId, Event>> best;
  auto better = [&](const Event& e) {
    if (forward ? e.ts <= from : e.ts >= from) return false;
    return !best || (forward ? e.ts < best->second.ts : e.ts > best->second.ts);
  };
  thread_local std::vector<Event> decoded;
  for (TrackId id = 0; id < tracks_.size(); ++id) {
    if (!tracks_[id] || (!tracks.empty() && std::find(tracks.begin(), tracks.end(), id) == tracks.end())) continue;
    const TrackStore& t = *tracks_[id];
    for (uint64_t j = t.base(); j < t.levels[0].end(); ++j) {
      const Node& n = t.levels[0].at(j);
      if ((t.chunk(j).name_bits & bits) == 0) continue;
      if (forward ? n.max_start <= from : n.min_start >= from) continue;
      if (best && (forward ? n.min_start >= best->second.ts : n.max_start <= best->second.ts)) continue;
      t.chunk(j).Decode(&decoded);
      for (uint32_t i = 0; i < decoded.size(); ++i) {
        Event& e = decoded[i];
        if (e.name >= match.size() || !match[e.name] || !better(e)) continue;
        e.track = id;
        best.emplace((uint64_t{id} << kIndexBits) | (j * kChunkEvents + i), e);
      }
    }
  }
  return best;
}

void TraceStore::ForEach(uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                         const std::function<void(StoredEventId, const Event&)>& fn) const {
  // The lock is held while one chunk is decoded, never while `fn` runs (an
  // export compresses and writes: the pipeline must not wait for it).
  std::vector<Event> decoded;
  size_t track_count;
  {
    std::shared_lock lock(mu_);
    track_count = tracks_.size();
    decoded = device_info_;  // whatever the tracks: an export describes its devices.
  }
  for (const Event& d : decoded) fn(kNoEventId, d);
  for (TrackId id = 0; id < track_count; ++id) {
    if (DerivedRows::IsDerived(id) || (!tracks.empty() && std::find(tracks.begin(), tracks.end(), id) == tracks.end())) {
      continue;  // the derived rows are the store's own view: never exported.
    }
    for (uint64_t j = 0;; ++j) {
      {
        std::shared_lock lock(mu_);
        const TrackStore* t = FindTrack(id);
        if (t == nullptr || j >= t->levels[0].end()) break;
        j = std::max(j, t->base());  // chunks freed meanwhile are skipped.
        if (j >= t->levels[0].end()) break;
        const Node& n = t->levels[0].at(j);
        if (n.min_start > t1 || n.max_end < t0) continue;
        t->chunk(j).Decode(&decoded);
      }
      for (uint32_t i = 0; i < decoded.size(); ++i) {
        Event& e = decoded[i];
        if (e.ts > t1 || e.end() < t0) continue;
        e.track = id;
        fn((uint64_t{id} << kIndexBits) | (j * kChunkEvents + i), e);
      }
    }
  }
}

std::string TraceStore::Name(NameId id) const {
  std::shared_lock lock(mu_);
  return id < names_.size() ? std::string(names_[id]) : std::string();
}

std::vector<std::string> TraceStore::Names() const {
  std::shared_lock lock(mu_);
  return std::vector<std::string>(names_.begin(), names_.end());
}

std::vector<std::pair<TrackId, TrackInfo>> TraceStore::Tracks() const {
  std::shared_lock lock(mu_);
  std::vector<std::pair<TrackId, TrackInfo>> out;
  for (TrackId id = 0; id < tracks_.size(); ++id) {
    if (!tracks_[id]) continue;
    if (DerivedRows::IsDerived(id)) {
      out.emplace_back(id, TrackInfo{0, TrackType::kGpuStream, 0, DerivedRows::DeviceOf(id)});
    } else {
      out.emplace_back(id, id < track_info_.size() ? track_info_[id] : TrackInfo{});
    }
  }
  return out;
}

TraceStore::Stats TraceStore::stats() const {
  std::shared_lock lock(mu_);
  Stats s;
  s.events = events_;
  for (const auto& t : tracks_) {
    if (!t) continue;
    s.chunks += t->chunks.size();
    if (!t->chunks.empty()) s.bytes += t->chunks.back().Bytes();  // the open chunk (the sealed ones: below)
    for (const Level& level : t->levels) s.bytes += level.nodes.size() * sizeof(Node);
  }
  s.bytes += sealed_bytes_;
  if (first_ns_ <= last_ns_) s.first_ns = first_ns_, s.last_ns = last_ns_;
  s.dropped_events = dropped_events_;
  s.dropped_until_ns = dropped_until_ns_;
  s.unstored_events = unstored_events_;
  return s;
}

}  // namespace liveprof
