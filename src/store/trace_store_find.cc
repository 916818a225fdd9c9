// The trace store's finding (trace_store.h): search by name, the count of
// matches, and the far ends of a viewport's flows. Each walks chunk by chunk
// and lets a waiting Append in between, as a query does.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <iterator>
#include <string>
#include <unordered_map>
#include <utility>

#include "store/trace_store.h"
#include "store/trace_store_parts.h"

namespace liveprof {
namespace {

// (ts, id) < (ts2, id2): the order search steps through.
bool Before(uint64_t ts, StoredEventId id, uint64_t ts2, StoredEventId id2) { return ts != ts2 ? ts < ts2 : id < id2; }

bool Wanted(const std::vector<TrackId>& tracks, TrackId id) {
  return tracks.empty() || std::find(tracks.begin(), tracks.end(), id) != tracks.end();
}

}  // namespace

uint64_t TraceStore::MatchingNames(std::string_view text, std::vector<bool>* match) const {
  match->assign(names_.size(), false);
  uint64_t bits = 0;
  for (NameId n = 0; n < names_.size(); ++n) {
    if (!text.empty() && names_[n].find(text) != std::string_view::npos)
      (*match)[n] = true, bits |= uint64_t{1} << (n & 63);
  }
  return bits;
}

void TraceStore::ForEachMatch(std::string_view text, const std::vector<TrackId>& tracks,
                              const std::function<bool(const Node&)>& want_chunk,
                              const std::function<void(StoredEventId, Event&)>& fn) const {
  std::shared_lock lock = LockShared();
  std::vector<bool> match;
  const uint64_t bits = MatchingNames(text, &match);
  if (bits == 0) return;
  thread_local std::vector<Event> decoded;
  thread_local std::string scratch;
  for (TrackId id = 0; id < tracks_.size(); ++id) {
    // (A counter row's samples are found on their thread: each once.)
    if (!tracks_[id] || !Wanted(tracks, id) || DerivedRows::IsCounterRow(id)) continue;
    const TrackStore& t = *tracks_[id];
    for (uint64_t j = t.base(); j < t.levels[0].end(); ++j) {
      LetWriterIn(lock);               // chunk by chunk, as Query.
      if (j < t.base()) j = t.base();  // freed meanwhile.
      if (j >= t.levels[0].end()) break;
      if ((t.chunk(j).name_bits & bits) == 0 || !want_chunk(t.levels[0].at(j))) continue;
      DecodeChunk(View(t, j, &scratch), &decoded);
      for (uint32_t i = 0; i < decoded.size(); ++i) {
        Event& e = decoded[i];
        if (e.name >= match.size() || !match[e.name]) continue;
        e.track = id;
        fn((uint64_t{id} << kIndexBits) | (j * kChunkEvents + i), e);
      }
    }
  }
}

std::optional<std::pair<StoredEventId, Event>> TraceStore::Search(std::string_view text, uint64_t from, bool forward,
                                                                  const std::vector<TrackId>& tracks,
                                                                  std::optional<StoredEventId> from_id) const {
  // Without an id: strictly after (before) `from`, whatever the id.
  const StoredEventId at = from_id.value_or(forward ? UINT64_MAX : 0);
  std::optional<std::pair<StoredEventId, Event>> best;
  ForEachMatch(
      text, tracks,
      [&](const Node& n) {
        if (forward ? n.max_start < from : n.min_start > from) return false;
        return !best || (forward ? n.min_start <= best->second.ts : n.max_start >= best->second.ts);
      },
      [&](StoredEventId id, Event& e) {
        if (forward ? !Before(from, at, e.ts, id) : !Before(e.ts, id, from, at)) return;
        if (!best || (forward ? Before(e.ts, id, best->second.ts, best->first)
                              : Before(best->second.ts, best->first, e.ts, id))) {
          best.emplace(id, e);
        }
      });
  return best;
}

TraceStore::MatchCount TraceStore::CountMatches(std::string_view text, uint64_t ts, StoredEventId at,
                                                const std::vector<TrackId>& tracks) const {
  MatchCount out;
  ForEachMatch(
      text, tracks, [](const Node&) { return true; },
      [&](StoredEventId id, Event& e) {
        ++out.total;
        out.before += Before(e.ts, id, ts, at);
      });
  return out;
}

TraceStore::AreaSums TraceStore::SumArea(uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                                         uint64_t max_events) const {
  AreaSums out;
  std::unordered_map<NameId, AreaSums::Name> by;
  struct Item {
    uint64_t ts, end;
    NameId name;
  };
  std::vector<Item> items;
  std::vector<Event> decoded;
  std::string scratch;
  size_t track_count;
  {
    const std::shared_lock lock = LockShared();
    track_count = tracks_.size();
  }
  for (TrackId id = 0; id < track_count && !out.truncated; ++id) {
    if (!Wanted(tracks, id) || DerivedRows::IsCounterRow(id)) continue;
    items.clear();
    for (uint64_t j = 0;; ++j) {
      const std::shared_lock lock = LockShared();
      const TrackStore* t = FindTrack(id);
      if (t == nullptr || j >= t->levels[0].end()) break;
      j = std::max(j, t->base());  // chunks freed meanwhile are skipped.
      if (j >= t->levels[0].end()) break;
      const Node& n = t->levels[0].at(j);
      if (n.min_start > t1 || n.max_end < t0) continue;
      DecodeChunk(View(*t, j, &scratch), &decoded);
      for (const Event& e : decoded) {
        if (e.ts > t1 || e.end() < t0 || e.kind == EventKind::kCounter) continue;
        if (out.events + items.size() >= max_events) {
          out.truncated = true;
          break;
        }
        items.push_back({e.ts, e.end(), e.name});
      }
      if (out.truncated) break;
    }
    if (items.empty()) continue;
    ++out.tracks;
    out.events += items.size();
    // Self time: by start, the longer first; a stack of the open ancestors.
    std::sort(items.begin(), items.end(),
              [](const Item& a, const Item& b) { return a.ts != b.ts ? a.ts < b.ts : a.end > b.end; });
    std::vector<std::pair<size_t, uint64_t>> stack;  // (item, its children's time so far)
    auto close = [&] {
      const Item& top = items[stack.back().first];
      AreaSums::Name& a = by[top.name];
      a.self += top.end - top.ts - std::min(top.end - top.ts, stack.back().second);
      stack.pop_back();
    };
    for (size_t i = 0; i < items.size(); ++i) {
      const Item& e = items[i];
      while (!stack.empty() && items[stack.back().first].end < e.end) close();
      if (!stack.empty()) stack.back().second += e.end - e.ts;
      stack.emplace_back(i, 0);
      AreaSums::Name& a = by[e.name];
      a.name = e.name;
      ++a.count;
      a.total += e.end - e.ts;
      a.max = std::max(a.max, e.end - e.ts);
    }
    while (!stack.empty()) close();
  }
  for (const auto& [name, a] : by) out.names.push_back(a);
  std::sort(out.names.begin(), out.names.end(), [](const auto& a, const auto& b) {
    return a.total != b.total ? a.total > b.total : a.count != b.count ? a.count > b.count : a.name < b.name;
  });
  return out;
}

void TraceStore::FindFlows(TraceQueryResult* r) const {
  // The slices' correlation ids, in one open-addressed table (a query may
  // return tens of thousands of slices: no node per id): which ends are
  // slices (1 a launch, a runtime API call; 2 device work; 3 both) and the
  // first launch's id.
  struct Corr {
    uint32_t corr = 0;  // 0: an empty slot.
    uint8_t ends = 0;
    StoredEventId launch = 0;
  };
  size_t with_corr = 0;
  for (const auto& t : r->tracks) {
    for (const auto& s : t.slices) with_corr += s.corr != 0;
  }
  if (with_corr == 0) return;
  const int bits = std::bit_width(with_corr + with_corr / 2);  // at most 2/3 full.
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  thread_local std::vector<Corr> table;
  table.assign(size_t{1} << bits, Corr{});
  auto slot = [&](uint32_t corr) -> Corr& {
    for (uint64_t i = (uint64_t{corr} * 0x9E3779B97F4A7C15ull) >> (64 - bits);; i = (i + 1) & mask) {
      if (table[i].corr == corr || table[i].corr == 0) return table[i];
    }
  };
  for (const auto& t : r->tracks) {
    for (const auto& s : t.slices) {
      if (s.corr == 0) continue;
      const bool launch = s.kind == EventKind::kRuntimeApi;
      if (!launch && !IsDeviceKind(s.kind)) continue;
      Corr& c = slot(s.corr);
      if (launch && (c.ends & 1) == 0) c.launch = s.id;  // the first launch.
      c.corr = s.corr;
      c.ends |= launch ? 1 : 2;
    }
  }
  // Launch -> device work, both in the view.
  size_t missing = 0;  // ids with one end among the slices.
  for (const Corr& c : table) missing += c.ends == 1 || c.ends == 2;
  for (const auto& t : r->tracks) {
    for (const auto& s : t.slices) {
      if (!IsDeviceKind(s.kind) || s.corr == 0) continue;
      if (const Corr& c = slot(s.corr); (c.ends & 1) != 0) r->flows.push_back({c.launch, s.id});
    }
  }
  // The other ends, not slices: a launch's (runtime API) work comes after
  // it, a device event's launch before it.
  if (missing == 0 || missing > TraceQueryResult::kMaxFlowEnds) return;
  std::unordered_map<uint32_t, uint64_t> want_work, want_launch;  // corr -> the slice's start.
  for (const auto& t : r->tracks) {
    for (const auto& s : t.slices) {
      if (s.corr == 0 || slot(s.corr).ends == 3) continue;
      if (s.kind == EventKind::kRuntimeApi) want_work.emplace(s.corr, s.ts);
      if (IsDeviceKind(s.kind)) want_launch.emplace(s.corr, s.ts);
    }
  }
  // The walk enters a node (decodes a chunk) that may hold one of the ids
  // looked for on its track (CorrRange): launches' on a track with runtime
  // API calls, device work's on one with device work (TrackStore::kinds).
  std::vector<uint32_t> launch_ids, work_ids, all_ids;
  for (const auto& [corr, ts] : want_launch) launch_ids.push_back(corr);
  for (const auto& [corr, ts] : want_work) work_ids.push_back(corr);
  std::sort(launch_ids.begin(), launch_ids.end());
  std::sort(work_ids.begin(), work_ids.end());
  std::merge(launch_ids.begin(), launch_ids.end(), work_ids.begin(), work_ids.end(), std::back_inserter(all_ids));
  uint64_t device_kinds = 0;
  for (int k = static_cast<int>(EventKind::kKernel); k <= static_cast<int>(EventKind::kMemset); ++k) {
    device_kinds |= uint64_t{1} << (k & 63);
  }
  const uint64_t launch_kind = uint64_t{1} << (static_cast<int>(EventKind::kRuntimeApi) & 63);
  // The windows to look in, merged: [ts - reach, ts] for launches, [ts, ts + reach] for work.
  std::vector<std::pair<uint64_t, uint64_t>> windows;
  for (const auto& [corr, ts] : want_launch)
    windows.emplace_back(ts - std::min(ts, TraceQueryResult::kFlowReachNs), ts);
  for (const auto& [corr, ts] : want_work)
    windows.emplace_back(ts, ts + std::min(UINT64_MAX - ts, TraceQueryResult::kFlowReachNs));
  std::sort(windows.begin(), windows.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& w : windows) {
    if (!merged.empty() && w.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, w.second);
    } else {
      merged.push_back(w);
    }
  }
  std::unordered_map<StoredEventId, TraceQueryResult::FlowEnd> found;
  std::unordered_map<uint32_t, StoredEventId> launch_of, work_of;  // corr -> the end found (the nearest).
  thread_local std::vector<Event> decoded;
  thread_local std::string scratch;
  std::shared_lock lock = LockShared();
  // By id: the walk lets an Append in, which may add a track (track_ids_).
  TrackId id = 0;
  for (size_t at = 0; at < track_ids_.size();
       at = static_cast<size_t>(std::upper_bound(track_ids_.begin(), track_ids_.end(), id) - track_ids_.begin())) {
    id = track_ids_[at];
    if (DerivedRows::IsDerived(id)) continue;
    const TrackStore& t = *tracks_[id];
    const bool launches = (t.kinds & launch_kind) != 0, work = (t.kinds & device_kinds) != 0;
    const std::vector<uint32_t>& ids = launches && work ? all_ids : launches ? launch_ids : work_ids;
    if ((!launches && !work) || ids.empty()) continue;
    for (const auto& window : merged) {
      const uint64_t a = window.first, b = window.second;  // (no structured binding in the lambda: clang 14)
      auto visit = [&](auto&& self, size_t level, uint64_t j) -> void {
        LetWriterIn(lock);
        if (j < t.levels[level].base || j >= t.levels[level].end()) return;  // freed meanwhile.
        // The ids first: their ranges lie close together, the nodes do not.
        if (!(level == 0 ? t.chunk(j).corrs : t.levels[level].corr_at(j)).HoldsOneOf(ids)) return;
        const Node& n = t.levels[level].at(j);  // (not read after the walk below lets the lock go)
        if (n.count == 0 || n.min_start > b || n.max_end < a) return;
        if (level > 0) {
          const Level& below = t.levels[level - 1];
          for (uint64_t c = std::max(j * kFanout, below.base); c < std::min(below.end(), (j + 1) * kFanout); ++c) {
            self(self, level - 1, c);
          }
          return;
        }
        DecodeChunk(View(t, j, &scratch), &decoded);
        for (uint32_t i = 0; i < decoded.size(); ++i) {
          const Event& e = decoded[i];
          if (e.corr == 0 || e.ts < a || e.ts > b) continue;
          const bool launch = e.kind == EventKind::kRuntimeApi;
          if (!launch && !IsDeviceKind(e.kind)) continue;
          const auto& want = launch ? want_launch : want_work;
          const auto w = want.find(e.corr);
          if (w == want.end() || (launch ? e.ts > w->second : e.ts < w->second)) continue;
          auto& of = launch ? launch_of : work_of;
          const StoredEventId eid = (uint64_t{id} << kIndexBits) | (j * kChunkEvents + i);
          if (const auto old = of.find(e.corr); old != of.end()) {  // the nearest wins (a corr id seen twice).
            const uint64_t old_ts = found[old->second].ts;
            if (launch ? old_ts >= e.ts : old_ts <= e.ts) continue;
            found.erase(old->second);
          }
          of[e.corr] = eid;
          found[eid] = {eid, id, e.ts, e.dur, e.name, e.kind};
        }
      };
      const size_t top = t.levels.size() - 1;
      for (uint64_t j = t.levels[top].base; j < t.levels[top].end(); ++j) visit(visit, top, j);
    }
  }
  lock.unlock();
  for (const auto& t : r->tracks) {
    for (const auto& s : t.slices) {
      if (s.corr == 0) continue;
      if (s.kind == EventKind::kRuntimeApi && want_work.count(s.corr)) {
        if (const auto it = work_of.find(s.corr); it != work_of.end()) r->flows.push_back({s.id, it->second});
      } else if (IsDeviceKind(s.kind) && want_launch.count(s.corr)) {
        if (const auto it = launch_of.find(s.corr); it != launch_of.end()) r->flows.push_back({it->second, s.id});
      }
    }
  }
  for (const auto& [eid, end] : found) r->flow_ends.push_back(end);
  std::sort(r->flow_ends.begin(), r->flow_ends.end(), [](const auto& x, const auto& y) { return x.id < y.id; });
}

}  // namespace liveprof
