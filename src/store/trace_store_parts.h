// The trace store's inner parts (trace_store.h), shared by trace_store.cc
// (appends and queries) and trace_store_disk.cc (the run's folder): a node
// of the level-of-detail index, a chunk, an index level and a track.
#ifndef LIVEPROF_STORE_TRACE_STORE_PARTS_H_
#define LIVEPROF_STORE_TRACE_STORE_PARTS_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "store/block_deque.h"
#include "store/trace_chunk.h"
#include "store/trace_mipmap.h"
#include "store/trace_segments.h"
#include "store/trace_store.h"

namespace liveprof {

// An event's id: (track << kIndexBits) | its index in the track.
inline constexpr uint64_t kIndexBits = 40;
inline constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;

// What a query's summaries report of an event: a counter sample's value
// (0 for the others).
inline double ValueOf(const Event& e) { return e.kind == EventKind::kCounter ? e.payload.counter.value : 0; }

// What a chunk or a node of chunks holds, for the query's walk: 64 bytes.
struct TraceStore::Node {
  uint64_t min_start = UINT64_MAX, max_start = 0;  // (64 bytes: one cache line)
  uint64_t max_end = 0;
  uint64_t max_dur = 0, sum_dur = 0;
  uint32_t count = 0;
  NameId longest = 0;
  // Counter samples' values (ValueOf): the largest, and the last to arrive.
  double max_value = -HUGE_VAL, last_value = 0;

  void Add(uint64_t start, uint64_t dur, NameId name, double value) {
    if (count == 0 || Longer(dur, name, max_dur, longest)) max_dur = dur, longest = name;
    max_value = std::max(max_value, value);
    last_value = value;
    min_start = std::min(min_start, start);
    max_start = std::max(max_start, start);
    max_end = std::max(max_end, start + dur);
    sum_dur += dur;
    ++count;
  }
  void Add(const Node& o) {
    if (o.count == 0) return;
    if (count == 0 || Longer(o.max_dur, o.longest, max_dur, longest)) max_dur = o.max_dur, longest = o.longest;
    max_value = std::max(max_value, o.max_value);
    last_value = o.last_value;  // children come in arrival order.
    min_start = std::min(min_start, o.min_start);
    max_start = std::max(max_start, o.max_start);
    max_end = std::max(max_end, o.max_end);
    sum_dur += o.sum_dur;
    count += o.count;
  }
};

// The least and the largest nonzero correlation id of a chunk or a node of
// chunks (none: the least above the largest): a query's flow ends skip
// what cannot hold the ids they look for (TraceStore::FindFlows).
struct CorrRange {
  uint32_t min = UINT32_MAX, max = 0;

  void Add(uint32_t corr) {
    min = std::min(min, corr == 0 ? UINT32_MAX : corr);
    max = std::max(max, corr);
  }
  void Add(const CorrRange& o) {
    min = std::min(min, o.min);
    max = std::max(max, o.max);
  }
  // Whether one of `ids` (sorted) is in the range.
  bool HoldsOneOf(const std::vector<uint32_t>& ids) const {
    const auto it = std::lower_bound(ids.begin(), ids.end(), min);
    return it != ids.end() && *it <= max;
  }
  // As the run folder's chunk head keeps it: 0 (a run written before it
  // was kept) reads back as every id.
  uint64_t Packed() const { return uint64_t{max} << 32 | min; }
  static CorrRange Unpacked(uint64_t packed) {
    if (packed == 0) return CorrRange{1, UINT32_MAX};
    return CorrRange{static_cast<uint32_t>(packed), static_cast<uint32_t>(packed >> 32)};
  }
};

// A query's folded events by pixel, one track at a time: only the pixels
// something folds into are written and cleared (a deep zoom folds into none
// of its thousands of pixels: nothing to clear), and read back in order.
class PixelFolds {
 public:
  // Empty, `width` pixels.
  void Reset(uint32_t width) {
    Drain([](uint32_t, const MipBucket&) {});  // what a query cut short left (an exception).
    if (buckets_.size() < width) buckets_.resize(width);
    used_.assign((width + 63) / 64, 0);
  }
  void Add(uint32_t px, const MipBucket& b) {
    buckets_[px].Add(b);
    used_[px >> 6] |= uint64_t{1} << (px & 63);
  }
  // How many pixels hold events.
  size_t used() const {
    size_t n = 0;
    for (const uint64_t bits : used_) n += static_cast<size_t>(std::popcount(bits));
    return n;
  }
  // fn(px, bucket) for each pixel with events, by px; all empty after.
  template <typename Fn>
  void Drain(Fn&& fn) {
    for (size_t w = 0; w < used_.size(); ++w) {
      for (uint64_t bits = used_[w]; bits != 0; bits &= bits - 1) {
        const uint32_t px = static_cast<uint32_t>(w * 64 + std::countr_zero(bits));
        fn(px, static_cast<const MipBucket&>(buckets_[px]));
        buckets_[px] = MipBucket{};
      }
      used_[w] = 0;
    }
  }

 private:
  std::vector<MipBucket> buckets_;  // empty where `used_` has no bit.
  std::vector<uint64_t> used_;      // a bit per pixel.
};

// A chunk of up to kChunkEvents events (trace_chunk.h). The open one (the
// last of its track) is in its track's builder; a sealed one is one buffer
// in RAM, or only on disk at `disk` once the memory budget let it go, or
// both.
struct TraceStore::Chunk {
  std::unique_ptr<char[]> data;  // the sealed columns; null while open or only on disk.
  ColumnEnds ends{};
  uint16_t count = 0;
  uint8_t uniform = 0;     // its columns that hold one entry for all (trace_chunk.h).
  bool counters = false;   // it holds counter samples.
  uint64_t name_bits = 0;  // one bit per name id mod 64: Search skips chunks.
  uint64_t disk = SegmentLog::kNowhere;
  CorrRange corrs;

  // What its columns take in RAM: the buffer as malloc rounds it.
  uint64_t DataBytes() const { return data ? (uint64_t{ends.back()} + 8 + 15) & ~uint64_t{15} : 0; }
};

// One level of a track's index: nodes by absolute position j (node j of
// level k covers chunks j*16^k .. (j+1)*16^k - 1), the first `base` of them
// gone with the chunks the retention rule freed.
struct TraceStore::Level {
  BlockDeque<Node> nodes;
  BlockDeque<CorrRange> corrs;  // above level 0, node j's (level 0's: the chunks').
  uint64_t base = 0;
  uint64_t end() const { return base + nodes.size(); }
  Node& at(uint64_t j) { return nodes[j - base]; }
  const Node& at(uint64_t j) const { return nodes[j - base]; }
  const CorrRange& corr_at(uint64_t j) const { return corrs[j - base]; }
};

// One track: its chunks (chunk j is chunks[j - base]) and the index over
// them: levels[0] summarises the chunks, levels[k] nodes of 16 nodes of
// levels[k - 1].
struct TraceStore::TrackStore {
  static_assert(kChunkEvents <= ChunkBuilder::kMaxEvents);
  static constexpr size_t kMaxLevels = 16;

  BlockDeque<Chunk> chunks;
  std::vector<Level> levels{1};
  TraceMipmap mip;              // the sealed chunks' events by time (trace_mipmap.h).
  ChunkBuilder open;            // the last chunk's events while it is open.
  bool building = false;        // the last chunk is open: these are its shell and summary
  Chunk* open_chunk = nullptr;  // (a deque keeps its elements in place, and
  Node* open_node = nullptr;    // `levels` never reallocates: see the constructor)

  TrackStore() { levels.reserve(kMaxLevels); }
  uint64_t events = 0;               // ever appended: the next event's index.
  uint64_t dirty_from = UINT64_MAX;  // the first chunk changed since the last Reindex.
  uint64_t resident_from = 0;        // the next chunk the memory budget lets go.
  uint64_t kinds = 0;                // a bit per EventKind (mod 64) it holds; all for a run read back.
  // The open chunk's events and column bytes already in the run folder
  // (tail records: TraceStore::WriteTail); 0 once it is sealed.
  uint16_t logged = 0;
  std::array<uint16_t, kChunkColumns> logged_len{};

  uint64_t base() const { return levels[0].base; }
  uint64_t end() const { return levels[0].end(); }
  const Chunk& chunk(uint64_t j) const { return chunks[j - base()]; }
  Chunk& chunk(uint64_t j) { return chunks[j - base()]; }
  bool is_open(uint64_t j) const { return building && j + 1 == end(); }

  // Adds `e` to the open chunk; true when that filled it (Seal it then).
  bool Append(const Event& e) {
    if (!building) {
      open_chunk = &chunks.emplace_back();
      open_node = &levels[0].nodes.emplace_back();
      building = true;
    }
    open.Put(e);
    open_chunk->count = static_cast<uint16_t>(open.count());
    open_chunk->name_bits |= uint64_t{1} << (e.name & 63);
    open_chunk->corrs.Add(e.corr);
    kinds |= uint64_t{1} << (static_cast<uint8_t>(e.kind) & 63);
    open_node->Add(e.ts, e.dur, e.name, e.kind == EventKind::kCounter ? e.payload.counter.value : 0);
    ++events;
    if (dirty_from == UINT64_MAX) dirty_from = end() - 1;  // else an earlier chunk of the batch.
    return open_chunk->count == kChunkEvents;
  }

  // The open chunk into one buffer.
  Chunk& Seal() {
    Chunk& c = chunks.back();
    c.uniform = open.Uniform();
    c.counters = open.counters();
    c.data.reset(new char[std::max<size_t>(open.SealedBytes(c.uniform), 1)]);
    c.ends = open.SealInto(c.data.get(), c.uniform);
    open.Clear();
    logged = 0;
    logged_len = {};
    building = false;
    open_chunk = nullptr;
    open_node = nullptr;
    return c;
  }

  // Sealed chunk j's events into the mipmap: whole when they fall in one of
  // its finest buckets, else one by one. Chunks come in order.
  void AddToMipmap(uint64_t j, const ChunkView& v, std::vector<Event>* scratch) {
    const Node& n = levels[0].at(j);
    if (n.count == 0) return;
    if (!mip.ready()) mip.Choose(n.max_start - n.min_start);
    const uint64_t first = j * kChunkEvents;  // arrival sequence: the index in the track.
    const MipBucket whole{n.sum_dur, n.max_dur, first + n.count - 1, n.count, n.longest, n.max_value, n.last_value};
    if (mip.AddWhole(n.min_start, n.max_start, n.max_dur, whole)) return;
    DecodeChunk(v, scratch, UINT32_MAX, /*times_only=*/!v.counters);
    // Runs of events bound for one bucket go in as one (most of them).
    int level = -1;
    uint64_t index = 0;
    MipBucket run;
    for (uint32_t i = 0; i < scratch->size(); ++i) {
      const Event& e = (*scratch)[i];
      const int l = mip.LevelOf(e.dur);
      if (l > TraceMipmap::kMaxLevel) continue;  // wide at every grid.
      if (l != level || (e.ts >> l) != index) {
        if (run.count > 0) mip.Add(level, index, run);
        level = l, index = e.ts >> l, run = MipBucket{};
      }
      run.Add(MipBucket::Of(e.dur, e.name, v.counters ? ValueOf(e) : 0, first + i));
    }
    if (run.count > 0) mip.Add(level, index, run);
  }

  // Adds a sealed chunk read back from disk (chunk j, not in RAM).
  void AddFromDisk(uint64_t j, const Chunk& head, const Node& node) {
    if (chunks.empty()) {
      levels[0].base = j;  // the levels above start from it (Reindex).
      resident_from = j;
    }
    chunks.push_back(Chunk{nullptr, head.ends, head.count, head.uniform, head.counters, head.name_bits, head.disk,
                           head.corrs});  // count 0: lost.
    levels[0].nodes.push_back(node);
    events = j * kChunkEvents + head.count;
    kinds = ~uint64_t{0};
    dirty_from = std::min(dirty_from, j);
  }

  // Node j of level k (k > 0) from its children that are left.
  void Combine(size_t k, uint64_t j) {
    const Level& below = levels[k - 1];
    Node n;
    CorrRange corrs;
    for (uint64_t c = std::max(j * kFanout, below.base); c < std::min((j + 1) * kFanout, below.end()); ++c) {
      n.Add(below.at(c));
      corrs.Add(k == 1 ? chunk(c).corrs : below.corr_at(c));
    }
    Level& level = levels[k];
    level.at(j) = n;
    level.corrs[j - level.base] = corrs;
  }

  // Frees the first chunk (sealed); the index above it follows. Returns
  // its event count.
  uint64_t FreeFront() {
    const uint64_t freed = chunks.front().count;
    if (freed > 0) mip.DropBefore(levels[0].nodes.front().max_start + 1);
    chunks.pop_front();
    levels[0].nodes.pop_front();
    ++levels[0].base;
    for (size_t k = 1; k < levels.size(); ++k) {
      Level& level = levels[k];
      if (level.nodes.empty()) break;
      if (levels[k - 1].base >= (level.base + 1) * kFanout) {  // all its children gone.
        level.nodes.pop_front();
        level.corrs.pop_front();
        ++level.base;
      } else {
        Combine(k, level.base);
      }
    }
    return freed;
  }

  // Chunk j's summary changed in place: the nodes above it follow.
  void RefreshAncestors(uint64_t j) {
    for (size_t k = 1; k < levels.size(); ++k) {
      j /= kFanout;
      if (j < levels[k].base || j >= levels[k].end()) break;
      Combine(k, j);
    }
  }

  // Brings the upper levels up to date with level 0: the nodes above the
  // chunks changed since the last call (a batch may fill many chunks).
  void Reindex() {
    if (dirty_from == UINT64_MAX) return;
    uint64_t dirty = dirty_from;
    for (size_t k = 1; levels[k - 1].end() > 1; ++k) {
      if (levels.size() == k) {
        if (k == kMaxLevels) break;  // 16^15 chunks: never.
        levels.emplace_back();
        levels.back().base = levels[k - 1].base / kFanout;
      }
      Level& level = levels[k];
      dirty /= kFanout;
      const uint64_t want = (levels[k - 1].end() + kFanout - 1) / kFanout;
      while (level.end() < want) level.nodes.emplace_back(), level.corrs.emplace_back();
      for (uint64_t j = std::max(level.base, dirty); j < want; ++j) Combine(k, j);
    }
    dirty_from = UINT64_MAX;
  }
};

}  // namespace liveprof

#endif  // LIVEPROF_STORE_TRACE_STORE_PARTS_H_
