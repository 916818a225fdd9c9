#include "store/trace_store.h"

#include "store/trace_store_parts.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

namespace liveprof {

TraceStore::TraceStore(Options options) : options_(options) {}

void TraceStore::WaitForWriter() const {
  // std::shared_mutex prefers readers (glibc): a reader that let go and took
  // the lock straight back would keep a waiting Append out. So it waits here
  // until the Append has had the lock.
  for (int spins = 0; writers_waiting_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

std::shared_lock<std::shared_mutex> TraceStore::LockShared() const {
  WaitForWriter();
  return std::shared_lock(mu_);
}

void TraceStore::LetWriterIn(std::shared_lock<std::shared_mutex>& lock) const {
  if (writers_waiting_.load(std::memory_order_acquire) == 0) return;
  lock.unlock();
  WaitForWriter();
  lock.lock();
}

void TraceStore::KeepDevice(const Event& e) {  // the latest per device.
  const auto same =
      std::find_if(device_info_.begin(), device_info_.end(), [&](const Event& d) { return d.device == e.device; });
  if (same == device_info_.end()) {
    device_info_.push_back(e);
  } else {
    *same = e;
  }
}

TraceStore::TrackStore& TraceStore::Track(TrackId id) {
  if (id >= tracks_.size()) tracks_.resize(size_t{id} + 1);
  if (!tracks_[id]) {
    tracks_[id] = std::make_unique<TrackStore>();
    track_ids_.insert(std::lower_bound(track_ids_.begin(), track_ids_.end(), id), id);
  }
  return *tracks_[id];
}

const TraceStore::TrackStore* TraceStore::FindTrack(TrackId id) const {
  return id < tracks_.size() ? tracks_[id].get() : nullptr;
}

void TraceStore::Append(std::span<const Event> definitions, std::span<const Event> events, uint64_t watermark_ns) {
  writers_waiting_.fetch_add(1, std::memory_order_acq_rel);  // readers let go at their next chunk.
  std::unique_lock lock(mu_);
  writers_waiting_.fetch_sub(1, std::memory_order_release);
  if (read_only_) return;
  const bool logging = log_ != nullptr;
  for (const Event& d : definitions) {
    if (d.kind == EventKind::kNameDef) {
      if (d.name >= names_.size()) names_.resize(size_t{d.name} + 1);
      name_text_.emplace_back(d.payload.name_def.data, d.payload.name_def.size);
      names_[d.name] = name_text_.back();
      derived_.DefineName(d.name, names_[d.name]);
      if (logging) WriteName(d.name);
    } else if (d.kind == EventKind::kTrackDef && d.track < DerivedRows::kFirstDerivedTrack) {
      if (d.track >= track_info_.size()) track_info_.resize(size_t{d.track} + 1);
      track_info_[d.track] = TrackInfo{d.name, d.payload.track_def.type, d.payload.track_def.os_tid, d.device,
                                       d.payload.track_def.process};
      derived_.Define(d.track, track_info_[d.track]);
      if (logging) WriteTrack(d.track);
    }
  }
  TrackStore* last = nullptr;
  TrackId last_id = 0;
  touched_.clear();
  auto put = [&](const Event& e) {
    if (last == nullptr || e.track != last_id) {
      last = e.track < tracks_.size() && tracks_[e.track] ? tracks_[e.track].get() : &Track(e.track);
      last_id = e.track;
    }
    if (last->dirty_from == UINT64_MAX) touched_.push_back(last_id);  // its first event of the batch.
    if (last->Append(e)) Seal(*last, last_id);
  };
  for (const Event& e : events) {
    if (e.kind == EventKind::kDeviceInfo) {  // a description, not on a timeline.
      KeepDevice(e);
      if (logging) WriteDevice(e);
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
  derived_.Derive(events, &derived_events_, watermark_ns);
  for (const Event& e : derived_events_) put(e);
  for (const TrackId id : touched_) tracks_[id]->Reindex();
  if (logging) {
    WriteTails();
    log_->Flush();  // one write for the batch; a failure stops the log (stats().spill_error).
  }
  Retain();
}

void TraceStore::QueryTrack(const TrackStore& t, TrackId id, const TraceQueryResult& grid, TraceQueryResult::Track* out,
                            uint64_t* visited, std::shared_lock<std::shared_mutex>& lock) const {
  const uint64_t t0 = grid.t0, t1 = grid.t1;  // [t0, t1): width pixels of 2^k ns.
  const int k = std::countr_zero(static_cast<uint64_t>(grid.ns_per_px));
  auto px_of = [&](uint64_t start) { return static_cast<uint32_t>((start - t0) >> k); };  // start in [t0, t1).
  auto wide = [&](uint64_t dur) { return (dur >> k) != 0; };
  // Folded events: the mipmap's buckets where it answers (pixels from
  // `fold_end` on), the chunks' own events before it, and the open chunk's
  // (not in the mipmap yet) everywhere.
  uint64_t fold_end = t1;
  if (t.mip.ready() && k >= t.mip.min_level()) {
    const uint64_t from = t.mip.valid_from();                     // the store freed what started before.
    const uint64_t edge = from == 0 ? 0 : ((from - 1) >> k) + 1;  // the first pixel edge at or after it.
    fold_end = edge <= (t0 >> k) ? t0 : edge >= (t0 >> k) + grid.width_px ? t1 : edge << k;
  }
  // The walk lets a waiting Append in between chunks (LetWriterIn): it
  // walks the chunks there were when it began (`end_j`), takes the mipmap's
  // buckets first (so a chunk sealed meanwhile is counted once: as the open
  // chunk it was, decoded), re-reads each node after a pause and skips
  // what the retention rule freed meanwhile.
  const uint64_t end_j = t.end();
  const uint64_t open_j = t.building ? end_j - 1 : UINT64_MAX;
  thread_local PixelFolds folds;  // by pixel.
  folds.Reset(grid.width_px);
  if (fold_end < t1) {
    const uint64_t first = t0 >> k;
    t.mip.ForEach(k, fold_end >> k, first + grid.width_px,
                  [&](uint64_t index, const MipBucket& b) { folds.Add(static_cast<uint32_t>(index - first), b); });
  }
  thread_local std::vector<Event> decoded;
  thread_local std::string scratch;
  constexpr int kFanoutBits = std::countr_zero(kFanout);
  uint32_t since_pause = 0;
  auto visit = [&](auto&& self, size_t level, uint64_t j) -> void {
    if (level == 0 || ++since_pause == 64) {  // at most one chunk's work (or 64 nodes') between pauses.
      since_pause = 0;
      LetWriterIn(lock);
    }
    if (j < t.levels[level].base) return;  // freed meanwhile.
    const Node n = t.levels[level].at(j);  // a copy: the lock may be let go below.
    if (n.count == 0 || n.min_start >= t1 || n.max_end < t0) return;
    const bool has_open = open_j != UINT64_MAX && (open_j >> (kFanoutBits * level)) == j;
    const bool need_wide = wide(n.max_dur);
    if (!need_wide && !has_open && (n.min_start >= fold_end || n.max_start < t0)) return;  // nothing of it drawn here.
    if (!need_wide && !has_open && n.min_start >= t0 && n.max_start < fold_end &&
        px_of(n.min_start) == px_of(n.max_start)) {
      // All its starts in one pixel, all narrow: folded whole (its last
      // event's sequence: the walk goes in arrival order).
      const uint64_t last_chunk = std::min((j + 1) << (kFanoutBits * level), t.end()) - 1;
      folds.Add(px_of(n.min_start), {n.sum_dur, n.max_dur, (last_chunk + 1) * kChunkEvents - 1, n.count, n.longest,
                                     n.max_value, n.last_value});
      return;
    }
    if (level > 0) {
      const Level& below = t.levels[level - 1];
      const uint64_t last = (end_j - 1) >> (kFanoutBits * (level - 1));  // the walk's last node below.
      for (uint64_t c = std::max(j * kFanout, below.base); c < std::min(below.end(), (j + 1) * kFanout) && c <= last;
           ++c) {
        self(self, level - 1, c);
      }
      return;
    }
    if (j >= end_j) return;  // appended after the walk began.
    const bool open = j == open_j;
    const ChunkView v = View(t, j, &scratch);
    DecodeChunk(v, &decoded, UINT32_MAX, /*times_only=*/!need_wide && !v.counters);
    *visited += decoded.size();
    if (!need_wide && !open) {
      // All narrow (the node says) and sealed: those that start in [t0,
      // fold_end) fold, added a run of one pixel at a time (a chunk's events
      // come mostly in order).
      MipBucket run;
      uint32_t run_px = 0;
      for (uint32_t i = 0; i < decoded.size(); ++i) {
        const Event& e = decoded[i];
        if (e.ts < t0 || e.ts >= fold_end) continue;
        const uint32_t px = px_of(e.ts);
        if (px != run_px && run.count != 0) folds.Add(run_px, run), run = MipBucket{};
        run_px = px;
        run.Add(MipBucket::Of(e.dur, e.name, v.counters ? ValueOf(e) : 0, j * kChunkEvents + i));
      }
      if (run.count != 0) folds.Add(run_px, run);
      return;
    }
    for (uint32_t i = 0; i < decoded.size(); ++i) {
      const Event& e = decoded[i];
      if (e.ts >= t1 || e.end() < t0) continue;
      if (wide(e.dur)) {
        if (e.end() == t0) continue;  // ends where the view begins: not in [t0, t1).
        TraceQueryResult::Slice s;
        s.id = (uint64_t{id} << kIndexBits) | (uint64_t{j} * kChunkEvents + i);
        s.ts = e.ts;
        s.dur = e.dur;
        s.name = e.name;
        s.corr = e.corr;
        s.kind = e.kind;
        out->slices.push_back(s);
      } else if (e.ts >= t0 && (e.ts < fold_end || open)) {
        const double value = v.counters ? ValueOf(e) : 0;  // (times_only leaves the kind unset)
        folds.Add(px_of(e.ts), MipBucket::Of(e.dur, e.name, value, j * kChunkEvents + i));
      }
    }
  };
  if (end_j > 0) {
    const size_t top = t.levels.size() - 1;
    const uint64_t last = (end_j - 1) >> (kFanoutBits * top);
    for (uint64_t j = t.levels[top].base; j <= last && j < t.levels[top].end(); ++j) visit(visit, top, j);
  }
  if (IsCounterRow(id)) HeldBefore(t, t0, out, lock);
  NestSlices(&out->slices);
  const double px_per_ns = std::ldexp(1.0, -k);  // (a power of two: the product is ldexp's, exactly)
  out->summaries.reserve(folds.used());
  folds.Drain([&](uint32_t px, const MipBucket& f) {
    const double busy = static_cast<double>(f.sum_dur) * px_per_ns;
    out->summaries.push_back({px, f.count, std::min(1.0, busy), f.longest, f.longest_dur, f.max_value, f.last_value});
  });
}

void NestSlices(std::vector<TraceQueryResult::Slice>* slices) {
  // By start, the longer first: a slice's ancestors come before it.
  std::sort(slices->begin(), slices->end(), [](const auto& a, const auto& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.dur != b.dur ? a.dur > b.dur : a.id < b.id;
  });
  // The slices still open at a start (end past it), with their depths. A
  // slice's depth is one more than the deepest open one that contains it
  // (ends at or after its end), 0 if none: one that merely overlaps it (it
  // ends first: two ops of a merged row, ends rounded past the next start)
  // is a neighbour in the same lane, not a parent, so back-to-back slices
  // never make a staircase. (An instant at a slice's end is inside it.)
  struct Open {
    uint64_t end;
    uint8_t depth;
  };
  std::vector<Open> open;
  for (auto& s : *slices) {
    const uint64_t end = s.ts + s.dur;
    std::erase_if(open, [&](const Open& o) { return o.end < s.ts || (o.end == s.ts && s.dur != 0); });
    int depth = 0;
    for (const Open& o : open) {
      if (o.end >= end) depth = std::max(depth, o.depth + 1);
    }
    s.depth = static_cast<uint8_t>(std::min(depth, 255));
    open.push_back({end, s.depth});
    // Many overlapping at once (a row of unrelated spans): the oldest are
    // the least likely parents; a bound keeps this linear.
    if (open.size() > 256) open.erase(open.begin(), open.begin() + 128);
  }
}

bool TraceStore::IsCounterRow(TrackId id) const {
  if (DerivedRows::IsDerived(id)) {
    return DerivedRows::RowOf(id) == DerivedRows::Row::kMemory || DerivedRows::RowOf(id) == DerivedRows::Row::kCounter;
  }
  return id < track_info_.size() && track_info_[id].type == TrackType::kCounter;
}

void TraceStore::HeldBefore(const TrackStore& t, uint64_t t0, TraceQueryResult::Track* out,
                            std::shared_lock<std::shared_mutex>& lock) const {
  // Right to left (the later arrivals first, so an equal start found later
  // does not win), skipping what starts at t0 or later and what cannot
  // start later than the best found: ~one chunk decoded when samples
  // arrive in time order.
  thread_local std::vector<Event> decoded;
  thread_local std::string scratch;
  auto visit = [&](auto&& self, size_t level, uint64_t j) -> void {
    LetWriterIn(lock);                     // as QueryTrack's walk: node by node, a chunk at most.
    if (j < t.levels[level].base) return;  // freed meanwhile.
    const Node n = t.levels[level].at(j);
    if (n.count == 0 || n.min_start >= t0 || (out->held && n.max_start <= out->held_ts)) return;
    if (level > 0) {
      const Level& below = t.levels[level - 1];
      for (uint64_t c = std::min(below.end(), (j + 1) * kFanout); c-- > std::max(j * kFanout, below.base);) {
        self(self, level - 1, c);
      }
      return;
    }
    DecodeChunk(View(t, j, &scratch), &decoded);
    for (size_t i = decoded.size(); i-- > 0;) {
      const Event& e = decoded[i];
      if (e.kind != EventKind::kCounter || e.ts >= t0 || (out->held && e.ts <= out->held_ts)) continue;
      out->held = true;
      out->held_ts = e.ts;
      out->held_value = e.payload.counter.value;
    }
  };
  const size_t top = t.levels.size() - 1;
  for (uint64_t j = t.levels[top].end(); j-- > t.levels[top].base;) visit(visit, top, j);
}

TraceQueryResult TraceStore::Query(const TraceQuery& q) const {
  TraceQueryResult r;
  r.t0 = q.t0;
  r.t1 = q.t1;
  r.width_px = q.width_px;
  if (q.t1 <= q.t0 || q.width_px == 0 || q.width_px > kMaxWidthPx) return r;
  // The grid: 2^k ns per pixel, the least at least (t1 - t0) / width, from
  // t0 rounded down to a pixel's edge (so the mipmap's buckets are pixels).
  // (At most 2^63 ns a pixel: a wider span takes two or three; the end is
  // computed wide and held to the clock's last ns.)
  const uint64_t want = (q.t1 - q.t0 - 1) / q.width_px + 1;
  const int k = std::min(63, static_cast<int>(std::bit_width(want - 1)));
  r.t0 = q.t0 >> k << k;
  const uint64_t last_px = (q.t1 - 1 - r.t0) >> k;
  r.width_px = static_cast<uint32_t>(last_px + 1);
  const unsigned __int128 end = r.t0 + (static_cast<unsigned __int128>(last_px + 1) << k);
  r.t1 = end > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(end);
  r.ns_per_px = std::ldexp(1.0, k);
  // The lock is taken per track and let go for a waiting Append between
  // chunks (QueryTrack): the pipeline thread never waits for a whole query.
  std::vector<TrackId> ids = q.tracks;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) {
    const std::shared_lock lock = LockShared();
    ids = track_ids_;
  }
  for (const TrackId id : ids) {
    std::shared_lock lock = LockShared();
    const TrackStore* t = FindTrack(id);
    if (t == nullptr) continue;
    r.tracks.emplace_back();
    r.tracks.back().track = id;
    QueryTrack(*t, id, r, &r.tracks.back(), &r.events_visited, lock);
  }
  FindFlows(&r);
  return r;
}

std::optional<Event> TraceStore::Get(StoredEventId id) const {
  const std::shared_lock lock = LockShared();
  const TrackStore* t = FindTrack(static_cast<TrackId>(id >> kIndexBits));
  const uint64_t index = id & kIndexMask;
  if (t == nullptr || index >= t->events) return std::nullopt;
  thread_local std::vector<Event> decoded;
  thread_local std::string scratch;
  if (index / kChunkEvents < t->base()) return std::nullopt;  // freed by the retention rule.
  const uint32_t i = static_cast<uint32_t>(index % kChunkEvents);
  DecodeChunk(View(*t, index / kChunkEvents, &scratch), &decoded, i + 1);
  if (decoded.size() != i + 1) return std::nullopt;  // unreadable (stats().read_errors).
  Event e = decoded.back();
  e.track = static_cast<TrackId>(id >> kIndexBits);
  return e;
}

void TraceStore::ForEach(uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                         const std::function<void(StoredEventId, const Event&)>& fn) const {
  ForEachWhile(t0, t1, tracks, [&](StoredEventId id, const Event& e) {
    fn(id, e);
    return true;
  });
}

bool TraceStore::ForEachWhile(uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                              const std::function<bool(StoredEventId, const Event&)>& fn) const {
  // The lock is held while one chunk is decoded, never while `fn` runs (an
  // export compresses and writes: the pipeline must not wait for it).
  std::vector<Event> decoded;
  std::string scratch;
  size_t track_count;
  {
    const std::shared_lock lock = LockShared();
    track_count = tracks_.size();
    decoded = device_info_;  // whatever the tracks: an export describes its devices.
  }
  for (const Event& d : decoded) {
    if (!fn(kNoEventId, d)) return false;
  }
  for (TrackId id = 0; id < track_count; ++id) {
    if (DerivedRows::IsDerived(id) ||
        (!tracks.empty() && std::find(tracks.begin(), tracks.end(), id) == tracks.end())) {
      continue;  // the derived rows are the store's own view: never exported.
    }
    for (uint64_t j = 0;; ++j) {
      {
        const std::shared_lock lock = LockShared();
        const TrackStore* t = FindTrack(id);
        if (t == nullptr || j >= t->levels[0].end()) break;
        j = std::max(j, t->base());  // chunks freed meanwhile are skipped.
        if (j >= t->levels[0].end()) break;
        const Node& n = t->levels[0].at(j);
        if (n.min_start > t1 || n.max_end < t0) continue;
        DecodeChunk(View(*t, j, &scratch), &decoded);
      }
      for (uint32_t i = 0; i < decoded.size(); ++i) {
        Event& e = decoded[i];
        if (e.ts > t1 || e.end() < t0) continue;
        e.track = id;
        if (!fn((uint64_t{id} << kIndexBits) | (j * kChunkEvents + i), e)) return false;
      }
    }
  }
  return true;
}

NameId TraceStore::CounterRowName(const TrackStore& t, TrackId id) const {
  if (const auto name = derived_.CounterName(id)) return *name;
  // A run read back: the name of a sample it holds (all have the row's).
  if (t.events == 0 || t.base() >= t.end()) return 0;
  thread_local std::vector<Event> decoded;
  thread_local std::string scratch;
  DecodeChunk(View(t, t.end() - 1, &scratch), &decoded, 1);
  return decoded.empty() ? 0 : decoded[0].name;
}

std::string TraceStore::Name(NameId id) const {
  const std::shared_lock lock = LockShared();
  return id < names_.size() ? std::string(names_[id]) : std::string();
}

std::vector<std::string> TraceStore::Names() const {
  const std::shared_lock lock = LockShared();
  return std::vector<std::string>(names_.begin(), names_.end());
}

std::vector<std::pair<TrackId, TrackInfo>> TraceStore::Tracks() const {
  const std::shared_lock lock = LockShared();
  std::vector<std::pair<TrackId, TrackInfo>> out;
  for (TrackId id = 0; id < tracks_.size(); ++id) {
    if (!tracks_[id]) continue;
    if (DerivedRows::IsCounterRow(id)) {  // named by its samples' name.
      out.emplace_back(id, TrackInfo{CounterRowName(*tracks_[id], id), TrackType::kCounter, 0, 0});
    } else if (DerivedRows::IsDerived(id)) {
      out.emplace_back(id, TrackInfo{0, TrackType::kGpuStream, 0, DerivedRows::DeviceOf(id)});
    } else {
      out.emplace_back(id, id < track_info_.size() ? track_info_[id] : TrackInfo{});
    }
  }
  return out;
}

TraceStore::Stats TraceStore::stats() const {
  const std::shared_lock lock = LockShared();
  Stats s;
  s.events = events_;
  for (const auto& t : tracks_) {
    if (!t) continue;
    s.chunks += t->chunks.size();
    // The blocks held, a part-filled last one whole (the open chunk's room
    // inside; columns: below).
    s.bytes += sizeof(TrackStore) + t->chunks.bytes();
    for (const Level& level : t->levels) s.bytes += level.nodes.bytes() + level.corrs.bytes();
    s.bytes += t->mip.bytes();
  }
  s.bytes += resident_bytes_;
  s.disk_bytes = log_ ? log_->disk_bytes() : 0;
  s.segments = log_ ? log_->segments() : 0;
  s.spilled_chunks = spilled_chunks_;
  s.read_errors = read_errors_.load(std::memory_order_relaxed);
  if (log_ && !read_only_) s.spill_error = log_->error();
  if (first_ns_ <= last_ns_) s.first_ns = first_ns_, s.last_ns = last_ns_;
  s.dropped_events = dropped_events_;
  s.dropped_until_ns = dropped_until_ns_;
  s.unstored_events = unstored_events_;
  return s;
}

}  // namespace liveprof
