// CorrWindow<V>: values keyed by correlation id, for ids that grow (CUPTI's
// are per process and count up with every API call), on the pipeline's
// per-event path: a launch and its device work find each other here.
//
// A direct-mapped table: the id's low bits are its slot (id & mask), so the
// ids of one stretch of the stream fill neighbouring slots in order, and a
// lookup is one load and one compare. A node hash map cost 4x the
// instructions per launch, and a flat one with a mixing hash missed the
// cache on each (bench/RESULTS.md). The table starts small and grows (x4)
// while a newer id would take a live older id's slot; at max_slots the older
// id gives way (the caller's on_evict counts it). So it holds the newest
// max_slots ids' entries at most: an id evicted is "forgotten", as if the
// caller had let it go, never confused with another (each slot keeps its id).
// An id that finds in its slot an id max_slots or more newer (a record far
// later than its call) is outside the window: forgotten at once, never
// made, so that it neither grows the table nor evicts a live newer id. (At
// max_slots, ids in one slot are a multiple of it apart: any older id is.)
//
// Ids compare by their 32-bit difference (they may wrap). Id 0 is never
// stored (it marks an empty slot). V is a small trivially copyable value,
// default-constructed for a new id. Not thread-safe.
#ifndef LIVEPROF_BASE_CORR_WINDOW_H_
#define LIVEPROF_BASE_CORR_WINDOW_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace liveprof {

template <typename V>
class CorrWindow {
  static_assert(std::is_trivially_copyable_v<V>);

 public:
  // max_ids: rounded up to a power of two (at least 1, at most 2^31, half
  // the ids). first_slots: the table's size at first (memory every instance
  // pays).
  explicit CorrWindow(size_t max_ids, size_t first_slots = size_t{1} << 12)
      : max_slots_(std::bit_ceil(std::clamp<size_t>(max_ids, 1, kMaxSlots))) {
    slots_.resize(std::min(max_slots_, std::bit_ceil(std::max<size_t>(first_slots, 1))));
    mask_ = static_cast<uint32_t>(slots_.size() - 1);
  }

  // The value of `id` (not 0), or null.
  V* Find(uint32_t id) {
    Slot& s = slots_[id & mask_];
    return s.id == id ? &s.value : nullptr;
  }

  // The value of `id` (not 0); *made when it was not there (then V{}). An
  // older id whose slot it takes is passed to on_evict(id, value) first.
  // Null (and not made) for an id outside the window: its slot holds one
  // max_slots or more newer.
  template <typename OnEvict>
  V* FindOrMake(uint32_t id, bool* made, OnEvict&& on_evict) {
    Slot& s = slots_[id & mask_];
    *made = s.id != id;
    if (!*made) return &s.value;
    if (s.id == 0) {
      s = Slot{id, V{}};
      return &s.value;
    }
    return Collide(id, made, on_evict);
  }

  // Lets go of `id` if it is there.
  void Erase(uint32_t id) {
    Slot& s = slots_[id & mask_];
    if (s.id == id) s = Slot{};
  }

  size_t slots() const { return slots_.size(); }

 private:
  struct Slot {
    uint32_t id = 0;
    V value{};
  };

  // `id` (not there) found another id in its slot. Out of line: rare, and
  // kept out of the callers' flattened per-event loops.
  template <typename OnEvict>
  [[gnu::noinline]] V* Collide(uint32_t id, bool* made, OnEvict& on_evict) {
    for (;;) {
      Slot& s = slots_[id & mask_];
      if (s.id == 0) {
        s = Slot{id, V{}};
        return &s.value;
      }
      const uint32_t newer_by = s.id - id;  // (as a signed difference: ids wrap)
      if (static_cast<int32_t>(newer_by) > 0 && newer_by >= max_slots_) {
        *made = false;  // outside the window.
        return nullptr;
      }
      if (slots_.size() >= max_slots_) {  // the window is full: the older id goes.
        on_evict(s.id, s.value);
        s = Slot{id, V{}};
        return &s.value;
      }
      Grow();
    }
  }

  void Grow() {
    // Four times the slots: ids distinct modulo the old size stay distinct
    // modulo the new one, so no two entries collide in the move.
    std::vector<Slot> grown(std::min(4 * slots_.size(), max_slots_));
    const uint32_t mask = static_cast<uint32_t>(grown.size() - 1);
    for (const Slot& old : slots_) {
      if (old.id != 0) grown[old.id & mask] = old;
    }
    slots_.swap(grown);
    mask_ = mask;
  }

  static constexpr size_t kMaxSlots = size_t{1} << 31;

  std::vector<Slot> slots_;
  uint32_t mask_ = 0;
  size_t max_slots_;
};

}  // namespace liveprof

#endif  // LIVEPROF_BASE_CORR_WINDOW_H_
