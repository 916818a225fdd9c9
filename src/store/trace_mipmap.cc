#include "store/trace_mipmap.h"

#include <algorithm>

namespace liveprof {

void TraceMipmap::Choose(uint64_t first_chunk_span) {
  // Buckets of two to four chunk spans: most chunks then fall in one bucket
  // and go in whole, without being decoded.
  min_level_ = std::clamp(static_cast<int>(std::bit_width(first_chunk_span)) + 1, kMinLevel, kMaxLevel);
}

void TraceMipmap::Put(int i, uint64_t index, const MipBucket& b) {
  if (i == 0) events_ += b.count;
  if (static_cast<size_t>(i) >= levels_.size()) levels_.resize(static_cast<size_t>(i) + 1);
  Level& l = levels_[i];
  if (l.pending.count == 0 || l.pending_index == index) {
    if (l.pending.count == 0) l.pending_index = index;
    l.pending.Add(b);
    return;
  }
  // The pending bucket moves on: the old one is stored, and carried up.
  const MipBucket old = l.pending;
  const uint64_t old_index = l.pending_index;
  l.pending = b;
  l.pending_index = index;
  Store(i, old_index, old);
  if (min_level_ + i < kMaxLevel) Put(i + 1, old_index >> 1, old);  // (`l` may move: not used after)
  if (i == 0) Coarsen();
}

void TraceMipmap::Coarsen() {
  // The finest level should hold kEventsPerBucket events a bucket on
  // average; a track sparser than its first chunk said loses it (what it
  // holds is in the level above once its pending bucket is carried up).
  const Level& finest = levels_[0];
  const uint64_t buckets = finest.stored.size();
  if (buckets < kEventsPerBucket || buckets * kEventsPerBucket <= events_ || levels_.size() < 2 ||
      min_level_ >= kMaxLevel) {
    return;
  }
  const MipBucket pending = finest.pending;
  const uint64_t index = finest.pending_index;
  levels_.erase(levels_.begin());
  ++min_level_;
  events_ -= pending.count;  // (counted again as it goes in)
  if (pending.count > 0) Put(0, index >> 1, pending);
}

void TraceMipmap::Store(int i, uint64_t index, const MipBucket& b) {
  auto& stored = levels_[i].stored;
  if (stored.empty() || stored.back().first < index) {
    stored.push_back({index, b});
    return;
  }
  // A late event's bucket (completion order): mostly the last one.
  const size_t at = stored.PartitionPoint([&](const auto& s) { return s.first < index; });
  if (at < stored.size() && stored[at].first == index) {
    stored[at].second.Add(b);
  } else {
    stored.insert(at, {index, b});
  }
}

void TraceMipmap::DropBefore(uint64_t ns) {
  valid_from_ = std::max(valid_from_, ns);
  for (size_t i = 0; i < levels_.size(); ++i) {
    // Buckets that end at or before `ns` go; one that straddles it stays,
    // unanswered for (its pixel starts before valid_from()).
    const uint64_t first_kept = valid_from_ >> (min_level_ + static_cast<int>(i));
    Level& l = levels_[i];
    while (!l.stored.empty() && l.stored.front().first < first_kept) l.stored.pop_front();
    if (l.pending.count != 0 && l.pending_index < first_kept) l.pending = MipBucket{};
  }
}

uint64_t TraceMipmap::bytes() const {
  uint64_t n = levels_.capacity() * sizeof(Level);
  for (const Level& l : levels_) n += l.stored.bytes();
  return n;
}

}  // namespace liveprof
