// U64Map: a uint64 → uint64 open-addressing hash map for the hot paths of
// the aggregators: linear probing, backward-shift deletion, no allocation per
// insert (it grows by doubling). The key ~0 lives in a side slot, so every
// key is allowed. Memory state keeps size → count in it (a few hundred hot
// keys), where it beats boost::unordered_flat_map; the maps where Boost's is
// as fast or faster use it (bench/RESULTS.md, bench/flat_map_bench.cc).
//
// Not thread-safe; owned by one aggregator on the pipeline thread.
#ifndef LIVEPROF_BASE_FLAT_MAP_H_
#define LIVEPROF_BASE_FLAT_MAP_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace liveprof {

class U64Map {
 public:
  size_t size() const { return size_ + (has_max_ ? 1 : 0); }

  uint64_t* Find(uint64_t key) {
    if (key == kEmpty) return has_max_ ? &max_value_ : nullptr;
    if (slots_.empty()) return nullptr;
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }

  // The value of `key`, inserted as 0 when absent; second = inserted.
  std::pair<uint64_t*, bool> Insert(uint64_t key) {
    if (key == kEmpty) {
      const bool inserted = !has_max_;
      if (inserted) {
        has_max_ = true;
        max_value_ = 0;
      }
      return {&max_value_, inserted};
    }
    if ((size_ + 1) * 4 > slots_.size() * 3) Grow();
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return {&s.value, false};
      if (s.key == kEmpty) {
        s.key = key;
        s.value = 0;
        ++size_;
        return {&s.value, true};
      }
    }
  }

  // Removes `key`; its value goes to *value. False when absent.
  bool Erase(uint64_t key, uint64_t* value) {
    if (key == kEmpty) {
      if (!has_max_) return false;
      *value = max_value_;
      has_max_ = false;
      return true;
    }
    if (slots_.empty()) return false;
    size_t i = Home(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == kEmpty) return false;
    }
    *value = slots_[i].value;
    // Backward shift: pull later members of the probe run into the hole
    // unless their home lies cyclically in (hole, their slot].
    for (size_t j = i;;) {
      j = (j + 1) & mask_;
      const uint64_t k = slots_[j].key;
      if (k == kEmpty) break;
      const size_t home = Home(k);
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].key = kEmpty;
    --size_;
    return true;
  }

  template <typename F>
  void ForEach(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.key != kEmpty) f(s.key, s.value);
    }
    if (has_max_) f(kEmpty, max_value_);
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    uint64_t value = 0;
  };

  size_t Home(uint64_t key) const {
    return static_cast<size_t>(((key ^ (key >> 32)) * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t cap = old.empty() ? 16 : old.size() * 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    shift_ = 64 - static_cast<uint32_t>(std::countr_zero(cap));
    for (const Slot& s : old) {
      if (s.key == kEmpty) continue;
      size_t i = Home(s.key);
      while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  uint32_t shift_ = 63;
  size_t size_ = 0;
  bool has_max_ = false;
  uint64_t max_value_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_BASE_FLAT_MAP_H_
