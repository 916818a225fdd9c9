// MemoryState's internals shared by its .cc files (memory_state.cc: the
// state, the peak, the timeline; memory_attribution.cc: ops of allocations
// and the breakdown at the peak). Not for other users.
#ifndef LIVEPROF_AGGREGATORS_TF_MEMORY_STATE_INTERNAL_H_
#define LIVEPROF_AGGREGATORS_TF_MEMORY_STATE_INTERNAL_H_

#include <boost/unordered/unordered_flat_map.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "aggregators/tf/memory_state.h"
#include "base/flat_map.h"

namespace liveprof {
namespace memory_internal {

inline constexpr size_t kDenseNames = size_t{1} << 16;
inline constexpr size_t kMinLogEntries = 4096;
inline constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

// The state after one alloc/free. seq = the event's index among this memory
// id's alloc/free events: ties between equal in-use go to the larger seq.
struct Sample {
  uint64_t ts = 0;
  uint64_t seq = 0;
  uint64_t stack = 0;
  uint64_t heap = 0;
  uint64_t free_bytes = 0;
  double fragmentation_pct = kUnknown;
  uint64_t in_use() const { return stack + heap; }
};

// One window bucket: counts and the highest in-use sample (latest on ties).
struct Bucket {
  uint64_t index = 0;  // the bucket number; for "older", the largest merged.
  bool used = false;
  bool has_peak = false;
  uint64_t allocs = 0;
  uint64_t frees = 0;
  Sample peak;

  void Offer(const Sample& s) {
    if (!has_peak || s.in_use() >= peak.in_use()) {
      peak = s;
      has_peak = true;
    }
  }
  void Combine(const Bucket& o) {
    if (!o.used) return;
    index = used ? std::max(index, o.index) : o.index;
    used = true;
    allocs += o.allocs;
    frees += o.frees;
    if (o.has_peak && (!has_peak || o.peak.in_use() > peak.in_use() ||
                       (o.peak.in_use() == peak.in_use() && o.peak.seq >= peak.seq))) {
      peak = o.peak;
      has_peak = true;
    }
  }
};

// A breakdown row's key: the op (0 = none known) and the allocation size.
struct RowKey {
  NameId op = 0;
  uint64_t bytes = 0;
  bool operator==(const RowKey&) const = default;
};
struct RowKeyHash {
  size_t operator()(const RowKey& k) const { return boost::hash_value(k.bytes * 0x9E3779B97F4A7C15ull ^ k.op); }
};

struct RowDelta {
  RowKey key;
  bool add;
};

// One live allocation: its size, its sample's seq (identifies it), its op,
// and whether it still waits for an enclosing span.
struct LiveAlloc {
  uint64_t bytes = 0;
  uint64_t seq = 0;
  NameId op = 0;
  bool pending = false;
};

// Address -> the live allocation (boost::unordered_flat_map is faster than
// U64Map on this churn, bench/RESULTS.md).
using LiveMap = boost::unordered_flat_map<uint64_t, LiveAlloc>;
// (op, size) -> count. Counts change by ±1 with unsigned wrap-around, so a
// log of deltas can be replayed in any order (a transiently "negative" count
// is a huge one); a count reaching 0 is erased. The rows without an op (all
// of them on tracks without spans) are keyed by size in a U64Map, faster on
// this hot path (bench/RESULTS.md); the others by (op, size).
class RowHist {
 public:
  void Add(RowKey key, bool add) {
    const uint64_t delta = add ? 1 : ~uint64_t{0};
    if (key.op == 0) {
      uint64_t* count = no_op_.Insert(key.bytes).first;
      if ((*count += delta) == 0) {
        uint64_t unused;
        no_op_.Erase(key.bytes, &unused);
      }
      return;
    }
    const auto [it, inserted] = by_op_.try_emplace(key, 0);
    if ((it->second += delta) == 0) by_op_.erase(it);
  }
  size_t size() const { return no_op_.size() + by_op_.size(); }
  // f(RowKey, count) for every row.
  template <typename F>
  void ForEach(F&& f) const {
    no_op_.ForEach([&](uint64_t bytes, uint64_t count) { f(RowKey{0, bytes}, count); });
    for (const auto& [key, count] : by_op_) f(key, count);
  }

 private:
  U64Map no_op_;
  boost::unordered_flat_map<RowKey, uint64_t, RowKeyHash> by_op_;
};

inline void HistAdd(RowHist& h, RowKey key, bool add) { h.Add(key, add); }

}  // namespace memory_internal

using memory_internal::Bucket;
using memory_internal::LiveAlloc;
using memory_internal::LiveMap;
using memory_internal::RowDelta;
using memory_internal::RowHist;
using memory_internal::RowKey;
using memory_internal::Sample;

struct MemoryState::Memory {
  uint32_t index = 0;  // in memories_.
  NameId allocator_id = 0;
  bool host = true;
  uint8_t device = 0;  // ordinal; 0 for host.
  std::string allocator_name;
  int32_t setting = -1;  // index into settings_, -1 none.
  // Configuration (counters and Catalog).
  uint64_t capacity = 0;
  bool has_reserved = false;
  uint64_t reserved = 0;
  uint64_t stack = 0;
  // Live allocations.
  LiveMap live;
  uint64_t heap = 0;
  // (op, size) → count of the live allocations; its copy at the peak; the
  // deltas since the peak (valid unless it outgrew its cap).
  RowHist hist;
  RowHist peak_hist;
  std::vector<RowDelta> log;
  bool log_valid = true;
  // Allocations live at the peak, still waiting for their span, freed since:
  // seq → bytes (their later attribution still changes peak_hist).
  boost::unordered_flat_map<uint64_t, uint64_t> freed_pending;
  bool incomplete = false;
  uint64_t unseen_count = 0;  // unknown frees since the peak.
  uint64_t unseen_bytes = 0;
  // Samples.
  uint64_t next_seq = 0;
  bool has_last = false;
  Sample last;
  bool has_peak = false;
  Sample peak;  // lifetime stack + heap peak.
  bool has_lifetime = false;
  uint64_t lifetime_peak_heap = 0;
  uint64_t lifetime_peak_heap_ts = 0;
  // Fragmentation at peaks (rate-limited).
  bool frag_computed = false;
  uint64_t frag_last_ts = 0;
  double peak_frag = 0;
  uint64_t peak_frag_ts = 0;
  // Timeline max-pyramid: points of 2^level events, plus a partial one.
  std::vector<Sample> points;
  Sample partial;
  uint64_t partial_count = 0;
  uint32_t level = 0;
  // Window buckets.
  std::vector<Bucket> ring;
  Bucket older;
  Bucket* cur = nullptr;
  uint64_t cur_index = 0;

  void LogDelta(RowKey key, bool add) {
    if (!log_valid) return;
    if (log.size() >= std::max(memory_internal::kMinLogEntries, 2 * hist.size())) {
      log_valid = false;  // the next peak copies the histogram instead.
      log.clear();
      return;
    }
    log.push_back({key, add});
  }
  void AddLive(const LiveAlloc& a) {
    heap += a.bytes;
    memory_internal::HistAdd(hist, {a.op, a.bytes}, true);
    LogDelta({a.op, a.bytes}, true);
  }
  // Removes `a` (just freed or replaced); remembers it when it was live at
  // the peak and still waits for its span.
  void RemoveLive(const LiveAlloc& a) {
    heap -= a.bytes;
    memory_internal::HistAdd(hist, {a.op, a.bytes}, false);
    LogDelta({a.op, a.bytes}, false);
    if (a.pending && has_peak && a.seq <= peak.seq) freed_pending[a.seq] = a.bytes;
  }
  uint64_t FreeBytes() const {
    if (capacity > 0) {
      const uint64_t used = stack + heap;
      return capacity > used ? capacity - used : 0;
    }
    if (has_reserved) return reserved > heap ? reserved - heap : 0;
    return 0;
  }
  Bucket& BucketFor(uint64_t index, size_t max_buckets) {
    if (cur != nullptr && cur_index == index) return *cur;
    if (ring.empty()) ring.resize(max_buckets);
    Bucket& slot = ring[index % max_buckets];
    if (slot.used && slot.index == index) {
      cur = &slot;
      cur_index = index;
      return slot;
    }
    if (slot.used && slot.index > index) {  // older than the ring: a late event.
      older.index = older.used ? std::max(older.index, index) : index;
      older.used = true;
      return older;
    }
    older.Combine(slot);
    slot = Bucket{};
    slot.used = true;
    slot.index = index;
    if (has_last) {  // the level carried into the bucket.
      slot.has_peak = true;
      slot.peak = last;
    }
    cur = &slot;
    cur_index = index;
    return slot;
  }
  void PushPoint(const Sample& s, size_t max_points) {
    if (partial_count == 0 || s.in_use() > partial.in_use()) partial = s;
    if (++partial_count < (uint64_t{1} << level)) return;
    points.push_back(partial);
    partial_count = 0;
    if (points.size() < 2 * max_points) return;
    for (size_t i = 0; i < max_points; ++i) {
      const Sample& a = points[2 * i];
      const Sample& b = points[2 * i + 1];
      points[i] = b.in_use() > a.in_use() ? b : a;  // earliest on ties.
    }
    points.resize(max_points);
    ++level;
  }
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_TF_MEMORY_STATE_INTERNAL_H_
