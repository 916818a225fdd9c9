// TraceMipmap: one track's events folded by time, for the trace store's
// zoomed-out queries (trace_store.h). Level k cuts time into buckets of 2^k
// ns (bucket i is [i * 2^k, (i + 1) * 2^k)) and folds into each bucket the
// events that start in it and are shorter than 2^k: at a query's grid of
// 2^k ns per pixel, exactly the events a pixel folds. So a full-range
// query reads one bucket per pixel instead of walking the chunk index down
// to every pixel edge (as Perfetto's UI mipmaps its slice tracks by
// power-of-two buckets).
//
// Levels start at the track's finest useful one, chosen from its first
// chunk (two to four chunk spans per bucket) and given up when the track
// turns out sparser (fewer than 64 events a bucket on average): the mipmap
// costs at most ~1 bucket per 64 events at its finest level and half as
// many at each level above. Finer grids are the chunk index's job.
//
// Writing: each event (or a whole chunk, when it falls in one bucket of the
// finest level) goes into a pending bucket of its own level, the first one
// it is short enough for. When a level's pending bucket moves on to another
// index, the old one is stored and added to the pending bucket of the level
// above: each level is stored once per bucket, however many levels there
// are. A query folds the stored buckets and the pending ones below.
//
// Every field folds in any order (a monoid): the longest by (duration,
// name), the last value by arrival sequence. Single-threaded: the store's
// lock guards it.
#ifndef LIVEPROF_STORE_TRACE_MIPMAP_H_
#define LIVEPROF_STORE_TRACE_MIPMAP_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "store/block_deque.h"
#include "stream/event.h"

namespace liveprof {

// The longer wins; between equals, the smaller name (any order gives the
// same). The index's nodes and the mipmap's buckets both fold by it.
inline bool Longer(uint64_t dur, NameId name, uint64_t than_dur, NameId than_name) {
  return dur > than_dur || (dur == than_dur && name < than_name);
}

// Events folded: how many, their durations' sum, the longest (ties: the
// smaller name), counter samples' largest value and the value of the last
// to arrive (by arrival sequence).
struct MipBucket {
  uint64_t sum_dur = 0, longest_dur = 0, last_seq = 0;
  uint32_t count = 0;
  NameId longest = 0;
  double max_value = -HUGE_VAL, last_value = 0;

  static MipBucket Of(uint64_t dur, NameId name, double value, uint64_t seq) {
    return {dur, dur, seq, 1, name, value, value};
  }
  void Add(const MipBucket& o) {
    if (o.count == 0) return;
    if (count == 0 || Longer(o.longest_dur, o.longest, longest_dur, longest)) {
      longest_dur = o.longest_dur, longest = o.longest;
    }
    if (count == 0 || o.last_seq >= last_seq) last_seq = o.last_seq, last_value = o.last_value;
    max_value = std::max(max_value, o.max_value);
    sum_dur += o.sum_dur;
    count += o.count;
  }
};

class TraceMipmap {
 public:
  static constexpr int kMinLevel = 10;              // 1 us: finer grids walk the chunks.
  static constexpr int kMaxLevel = 63;              // a query's grid goes no coarser.
  static constexpr uint64_t kEventsPerBucket = 64;  // at least, on average, at the finest level.

  bool ready() const { return min_level_ > 0; }
  int min_level() const { return min_level_; }
  // Picks the finest level from the starts a first chunk spans.
  void Choose(uint64_t first_chunk_span);

  // The level an event of `dur` ns folds into first: the finest it is
  // shorter than a bucket of; above kMaxLevel (2^63 ns or longer) none: it
  // is wide at every grid.
  int LevelOf(uint64_t dur) const { return std::max(min_level_, static_cast<int>(std::bit_width(dur))); }
  // Events folded into `b`, all for bucket `index` of `level` (LevelOf each).
  // (A level finer than the finest now, given up meanwhile: its bucket's
  // place in the finest.)
  void Add(int level, uint64_t index, const MipBucket& b) {
    if (level < min_level_) index >>= min_level_ - level, level = min_level_;
    if (level <= kMaxLevel) Put(level - min_level_, index, b);
  }
  // Events whose starts all fall in one bucket of the finest level and are
  // all shorter than it, folded (a whole chunk); false when they do not.
  bool AddWhole(uint64_t min_start, uint64_t max_start, uint64_t max_dur, const MipBucket& b) {
    if ((min_start >> min_level_) != (max_start >> min_level_) ||
        static_cast<int>(std::bit_width(max_dur)) > min_level_)
      return false;
    Put(0, min_start >> min_level_, b);
    return true;
  }

  // Events that start before `ns` are gone (the store freed them): from now
  // on the buckets before it are not answered for (valid_from()).
  void DropBefore(uint64_t ns);
  uint64_t valid_from() const { return valid_from_; }

  // At a grid of 2^k ns per pixel (k >= min_level()): fn(index, bucket) for
  // the stored and pending buckets that fold into pixel indexes [lo, hi)
  // (index i: [i * 2^k, (i + 1) * 2^k)); an index may come several times.
  template <typename Fn>
  void ForEach(int k, uint64_t lo, uint64_t hi, Fn&& fn) const {
    if (!ready() || k < min_level_ || levels_.empty()) return;
    const int top = std::min(k - min_level_, static_cast<int>(levels_.size()) - 1);
    const int shift = k - (min_level_ + top);
    const Level& l = levels_[top];
    // Stored buckets are by index: the first that can fold into `lo`.
    for (size_t at = l.stored.PartitionPoint([&](const auto& b) { return b.first < (lo << shift); });
         at < l.stored.size() && (l.stored[at].first >> shift) < hi; ++at) {
      fn(l.stored[at].first >> shift, l.stored[at].second);
    }
    for (int i = 0; i <= top; ++i) {
      const Level& l = levels_[i];
      if (l.pending.count == 0) continue;
      const uint64_t at = l.pending_index >> (k - (min_level_ + i));
      if (at >= lo && at < hi) fn(at, l.pending);
    }
  }

  uint64_t bytes() const;

 private:
  struct Level {
    // By index. A deque: DropBefore frees its front block by block, where a
    // vector's compaction moved (and reallocated) the whole level at once:
    // tens of MiB, a pipeline stall long enough to fill the producers' rings
    // (the soak's drop bursts). Blocks of 64 KiB (block_deque.h):
    // a full-range query reads a level's buckets on a few pages.
    BlockDeque<std::pair<uint64_t, MipBucket>> stored;
    MipBucket pending;
    uint64_t pending_index = 0;
  };
  void Put(int i, uint64_t index, const MipBucket& b);
  void Store(int i, uint64_t index, const MipBucket& b);
  void Coarsen();

  int min_level_ = 0;
  uint64_t valid_from_ = 0;
  uint64_t events_ = 0;        // ever added.
  std::vector<Level> levels_;  // levels_[i]: level min_level_ + i.
};

}  // namespace liveprof

#endif  // LIVEPROF_STORE_TRACE_MIPMAP_H_
