// BlockDeque: the trace store's double-ended queue for its index levels,
// chunks and mipmap buckets (trace_store_parts.h, trace_mipmap.h). As with
// std::deque, an element stays where it was put until it is popped (the
// store keeps pointers to its open chunk and node), pushing at the back
// never moves the others and popping the front frees whole blocks: no
// whole-level move or reallocation (a vector's compaction stalled the
// pipeline). Unlike libstdc++'s deque, whose blocks hold 512
// bytes (8 index nodes) each, a block here holds about 64 KiB: a walk over
// neighbouring elements stays on a few pages. At 100 M events the 512-byte
// blocks spread a track's index and mipmap over as many pages as blocks,
// scattered through a 2 GB heap, and BM_ViewportQuery read them at a TLB
// miss every few elements (1.5x slower than with vectors).
//
// So that a short queue (a track of a few events, a mipmap's coarse
// levels) takes little room, the first blocks are small: kFirst elements,
// then kFirst again and doubling up to kBlock. Positions count from the
// first element ever pushed: position p < kBlock is in block
// bit_width(p / kFirst) (block 0: [0, kFirst), block b >= 1:
// [kFirst << (b - 1), kFirst << b)); past kBlock, in block
// kSmall + p / kBlock, kBlock elements each.
//
// Not thread-safe: the store's lock guards it.
#ifndef LIVEPROF_STORE_BLOCK_DEQUE_H_
#define LIVEPROF_STORE_BLOCK_DEQUE_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace liveprof {

template <typename T>
class BlockDeque {
 public:
  static constexpr int kShift =
      static_cast<int>(std::bit_width(std::max<size_t>(1, (size_t{64} << 10) / sizeof(T)))) - 1;
  static constexpr int kFirstShift =
      std::min(kShift, static_cast<int>(std::bit_width(std::max<size_t>(1, 256 / sizeof(T)))) - 1);
  static constexpr uint64_t kBlock = uint64_t{1} << kShift;
  static constexpr uint64_t kFirst = uint64_t{1} << kFirstShift;
  static constexpr size_t kSmall = static_cast<size_t>(kShift - kFirstShift);  // the last small block.

  size_t size() const { return static_cast<size_t>(end_ - begin_); }
  bool empty() const { return end_ == begin_; }
  T& operator[](size_t i) { return At(begin_ + i); }
  const T& operator[](size_t i) const { return At(begin_ + i); }
  T& front() { return At(begin_); }
  const T& front() const { return At(begin_); }
  T& back() { return At(end_ - 1); }
  const T& back() const { return At(end_ - 1); }

  // A new element at the back, value-initialised; the others stay in place.
  T& emplace_back() {
    const size_t b = BlockOf(end_);
    if (b - freed_ == blocks_.size()) blocks_.push_back(std::make_unique<T[]>(Capacity(b)));
    return At(end_++);  // (a position is never used twice: the slot is as the block began)
  }
  void push_back(T v) { emplace_back() = std::move(v); }

  // Drops the first element; frees its block once it holds no element.
  void pop_front() {
    if constexpr (!std::is_trivially_destructible_v<T>) At(begin_) = T{};  // (a chunk's columns)
    ++begin_;
    const size_t first = BlockOf(begin_);
    if (first > freed_) {
      const size_t gone = std::min(first - freed_, blocks_.size());
      blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(gone));
      freed_ = first;
    }
  }

  // `v` before element i: the elements from i on move back by one (a late
  // mipmap bucket: mostly near the back).
  void insert(size_t i, T v) {
    emplace_back();
    for (size_t k = size() - 1; k > i; --k) (*this)[k] = std::move((*this)[k - 1]);
    (*this)[i] = std::move(v);
  }

  // The first i in [0, size()) with !before(element i): the elements must
  // be partitioned by it (as std::partition_point).
  template <typename Pred>
  size_t PartitionPoint(Pred&& before) const {
    size_t lo = 0, n = size();
    while (n > 0) {
      const size_t half = n / 2;
      if (before((*this)[lo + half])) {
        lo += half + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    return lo;
  }

  // Bytes of the blocks and of their table.
  uint64_t bytes() const {
    uint64_t n = blocks_.capacity() * sizeof(blocks_[0]);
    for (size_t b = 0; b < blocks_.size(); ++b) n += Capacity(freed_ + b) * sizeof(T);
    return n;
  }

 private:
  static size_t BlockOf(uint64_t p) {
    return p < kBlock ? static_cast<size_t>(std::bit_width(p >> kFirstShift))
                      : kSmall + static_cast<size_t>(p >> kShift);
  }
  static uint64_t Capacity(size_t b) { return b == 0 ? kFirst : b <= kSmall ? kFirst << (b - 1) : kBlock; }
  T& At(uint64_t p) const {
    if (p < kBlock) {
      const size_t b = BlockOf(p);
      return blocks_[b - freed_][b == 0 ? p : p - (kFirst << (b - 1))];
    }
    return blocks_[kSmall + static_cast<size_t>(p >> kShift) - freed_][p & (kBlock - 1)];
  }

  std::vector<std::unique_ptr<T[]>> blocks_;  // blocks_[0] is block number freed_.
  size_t freed_ = 0;                          // blocks freed at the front.
  uint64_t begin_ = 0, end_ = 0;              // the elements' positions: [begin_, end_).
};

}  // namespace liveprof

#endif  // LIVEPROF_STORE_BLOCK_DEQUE_H_
