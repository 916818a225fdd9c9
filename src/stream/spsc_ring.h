// SpscRing: a bounded single-producer / single-consumer ring of Events.
//
// Producer side (the one thread that owns the ring): wait-free two-phase
// write. TryReserve() hands out the next slot or, when the ring is full,
// counts a drop and returns null; the caller fills the slot in place and
// Publish() makes it visible with one release store. The producer reads the
// consumer's index only when its cached copy says the ring is full, so a push
// touches no shared cache line except the slot and its own head.
//
// Consumer side (the drain thread): Drain() copies out everything published
// in at most two contiguous pieces and frees the slots with one release store.
//
// Why our own ring and not moodycamel::ConcurrentQueue: bench/ring_bench.cc
// measures both on this machine; the figures are in bench/RESULTS.md.
#ifndef LIVEPROF_STREAM_SPSC_RING_H_
#define LIVEPROF_STREAM_SPSC_RING_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "stream/event.h"

namespace liveprof {

class SpscRing {
 public:
  // 64 Mi events = 3 GiB: beyond this a capacity is a mistake, not a wish.
  static constexpr size_t kMaxCapacity = size_t{1} << 26;

  // A ring holding at least `capacity` events (rounded up to a power of two).
  // Returns null and sets *error (if given) when capacity is 0, above
  // kMaxCapacity, or the memory cannot be had. Any thread.
  static std::unique_ptr<SpscRing> Create(size_t capacity, std::string* error = nullptr);

  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  // Producer thread only. The slot to fill, or null if the ring is full (the
  // drop is counted). Call Publish() after filling a non-null slot.
  Event* TryReserve() {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ >= capacity_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ >= capacity_) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return nullptr;
      }
    }
    return &slots_[head & mask_];
  }

  // Producer thread only. Makes the slot from the last TryReserve() visible.
  void Publish() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Producer thread only. Copy-in convenience: reserve, copy, publish.
  bool TryPush(const Event& e) {
    Event* slot = TryReserve();
    if (slot == nullptr) return false;
    *slot = e;
    Publish();
    return true;
  }

  // Producer thread only. Copies in as many of `events` as fit, in order,
  // publishes them with one store and counts the rest as dropped. Returns how
  // many went in. (For a producer that has its events in hand already: the
  // socket ingest's decoded batches.)
  size_t TryPushBulk(std::span<const Event> events) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ + events.size() > capacity_) tail_cache_ = tail_.load(std::memory_order_acquire);
    const size_t n = std::min(events.size(), static_cast<size_t>(capacity_ - (head - tail_cache_)));
    const size_t at = static_cast<size_t>(head & mask_);
    const size_t before_wrap = std::min(n, capacity_ - at);
    std::copy_n(events.data(), before_wrap, slots_.get() + at);
    std::copy_n(events.data() + before_wrap, n - before_wrap, slots_.get());
    head_.store(head + n, std::memory_order_release);
    if (n < events.size()) {
      dropped_.store(dropped_.load(std::memory_order_relaxed) + (events.size() - n), std::memory_order_relaxed);
    }
    return n;
  }
  // Consumer thread only. Calls fn(std::span<Event>) on every published event
  // in order, in at most two pieces (the span is mutable so the consumer may
  // convert in place before copying), then frees the slots. Returns the count.
  template <typename Fn>
  size_t Drain(Fn&& fn) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    const uint64_t head = head_.load(std::memory_order_acquire);
    const size_t n = static_cast<size_t>(head - tail);
    if (n == 0) return 0;
    const size_t first = static_cast<size_t>(tail & mask_);
    const size_t run = n < capacity_ - first ? n : capacity_ - first;
    fn(std::span<Event>(slots_.get() + first, run));
    if (run < n) fn(std::span<Event>(slots_.get(), n - run));
    tail_.store(head, std::memory_order_release);
    return n;
  }

  // Any thread. Events published so far / dropped so far (relaxed: a snapshot).
  uint64_t published() const { return head_.load(std::memory_order_relaxed); }
  // Consumer thread. Events drained so far.
  uint64_t drained() const { return tail_.load(std::memory_order_relaxed); }
  uint64_t dropped() const {
    return dropped_.load(std::memory_order_relaxed) + source_dropped_.load(std::memory_order_relaxed);
  }
  // Any thread. Adds events the producer's own source lost before they could
  // reach the ring (CUPTI's dropped records), so that they count as this
  // ring's drops.
  void AddSourceDropped(uint64_t n) { source_dropped_.fetch_add(n, std::memory_order_relaxed); }
  // Any thread. Events published and not yet drained (approximate).
  size_t size() const {
    return static_cast<size_t>(head_.load(std::memory_order_relaxed) - tail_.load(std::memory_order_relaxed));
  }
  size_t capacity() const { return capacity_; }

 private:
  struct RawDelete {
    void operator()(Event* p) const { ::operator delete[](p); }
  };
  using Slots = std::unique_ptr<Event[], RawDelete>;

  SpscRing(Slots slots, size_t capacity) : slots_(std::move(slots)), capacity_(capacity), mask_(capacity - 1) {}

  const Slots slots_;
  const size_t capacity_;
  const size_t mask_;

  // Producer-owned line: written by the producer, read rarely by the consumer.
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> source_dropped_{0};  // AddSourceDropped(), any thread.

  // Consumer-owned line.
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace liveprof

#endif  // LIVEPROF_STREAM_SPSC_RING_H_
