// CorrWindow: values by growing correlation id, in a direct-mapped table
// that grows while a newer id would take a live older id's slot and, at its
// cap, lets the older id go (told to the caller).
#include "base/corr_window.h"

#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "doctest/doctest.h"

namespace liveprof::corr_window_test {
namespace {

TEST_CASE("corr window: entries survive growth, find, make and erase agree with a map") {
  CorrWindow<uint64_t> w(/*max_ids=*/1 << 16, /*first_slots=*/16);
  std::map<uint32_t, uint64_t> ref;
  std::mt19937 rng(7);
  std::vector<std::pair<uint32_t, uint64_t>> evicted;
  auto on_evict = [&](uint32_t id, uint64_t v) { evicted.emplace_back(id, v); };
  for (uint32_t id = 1; id <= 20'000; ++id) {
    if (rng() % 3 == 0) continue;  // sparse ids, as non-launch API calls leave.
    bool made = false;
    uint64_t& v = *w.FindOrMake(id, &made, on_evict);
    CHECK(made);
    CHECK(v == 0);
    v = uint64_t{id} * 3;
    ref[id] = v;
    if (id % 7 == 0) {  // a second record of the same call finds it.
      CHECK(w.FindOrMake(id, &made, on_evict) == w.Find(id));
      CHECK_FALSE(made);
    }
    if (id > 100 && rng() % 4 == 0) {  // some let go, as closed steps' launches.
      const uint32_t old = id - 100;
      w.Erase(old);
      ref.erase(old);
    }
  }
  CHECK(evicted.empty());       // 20 k ids fit under the cap of 64 Ki.
  CHECK(w.slots() == 1 << 16);  // 16, 64, ..., 16 Ki, 64 Ki: the last id needed it.
  for (uint32_t id = 1; id <= 20'000; ++id) {
    const uint64_t* v = w.Find(id);
    const auto it = ref.find(id);
    REQUIRE((v != nullptr) == (it != ref.end()));
    if (v != nullptr) CHECK(*v == it->second);
  }
}

TEST_CASE("corr window: at the cap an older id gives way, and only its own slot") {
  CorrWindow<uint32_t> w(/*max_ids=*/8, /*first_slots=*/4);
  std::vector<std::pair<uint32_t, uint32_t>> evicted;
  auto on_evict = [&](uint32_t id, uint32_t v) { evicted.emplace_back(id, v); };
  bool made = false;
  for (uint32_t id = 1; id <= 8; ++id) *w.FindOrMake(id, &made, on_evict) = id + 100;
  CHECK(w.slots() == 8);
  CHECK(evicted.empty());
  *w.FindOrMake(9, &made, on_evict) = 109;   // slot 1: id 1 goes.
  *w.FindOrMake(12, &made, on_evict) = 112;  // slot 4: id 4 goes.
  REQUIRE(evicted.size() == 2);
  CHECK(evicted[0] == std::make_pair(1u, 101u));
  CHECK(evicted[1] == std::make_pair(4u, 104u));
  CHECK(w.Find(1) == nullptr);
  CHECK(w.Find(4) == nullptr);
  CHECK(*w.Find(9) == 109);
  CHECK(*w.Find(2) == 102);
  w.Erase(1);  // gone already: leaves id 9 in its slot.
  CHECK(*w.Find(9) == 109);
  w.Erase(9);
  CHECK(w.Find(9) == nullptr);
  *w.FindOrMake(17, &made, on_evict) = 117;  // slot 1 is free again: no eviction.
  CHECK(evicted.size() == 2);
}

TEST_CASE("corr window: an id older than the window is forgotten at once, a live newer one kept") {
  std::vector<uint32_t> evicted;
  auto on_evict = [&](uint32_t id, uint32_t) { evicted.push_back(id); };
  bool made = true;
  // At the cap: ids 9..16 fill the window of 8; a late record of id 1 (its
  // slot holds 9) neither evicts 9 nor is made.
  CorrWindow<uint32_t> w(/*max_ids=*/8, /*first_slots=*/8);
  for (uint32_t id = 9; id <= 16; ++id) *w.FindOrMake(id, &made, on_evict) = id + 100;
  CHECK(w.FindOrMake(1, &made, on_evict) == nullptr);
  CHECK_FALSE(made);
  CHECK(evicted.empty());
  REQUIRE(w.Find(9) != nullptr);
  CHECK(*w.Find(9) == 109);
  CHECK(w.Find(1) == nullptr);
  // 8 finds 16 in its slot, 8 newer: just outside.
  CHECK(w.FindOrMake(8, &made, on_evict) == nullptr);
  CHECK(w.FindOrMake(9, &made, on_evict) == w.Find(9));
  CHECK_FALSE(made);

  // Below the cap: an id outside the window does not grow the table.
  CorrWindow<uint32_t> big(/*max_ids=*/1 << 10, /*first_slots=*/16);
  for (uint32_t id = 2000; id < 2016; ++id) *big.FindOrMake(id, &made, on_evict) = id;
  CHECK(big.slots() == 16);
  CHECK(big.FindOrMake(2000 - 1024, &made, on_evict) == nullptr);  // 2000 in its slot, 1,024 newer: outside;
  CHECK(big.slots() == 16);
  CHECK(big.FindOrMake(2000 - 1008, &made, on_evict) != nullptr);  // 1,008: within; it grows.
  CHECK(made);
  CHECK(big.slots() == 64);
  CHECK(evicted.empty());

  // Ids that wrap past 2^32 are newer, not older.
  CorrWindow<uint32_t> wrap(/*max_ids=*/8, /*first_slots=*/8);
  for (uint32_t id = 0xFFFFFFFCu; id != 4; ++id) {
    if (id == 0) continue;  // (0 is never an id)
    REQUIRE(wrap.FindOrMake(id, &made, on_evict) != nullptr);
    CHECK(made);
  }
  CHECK(wrap.Find(0xFFFFFFFCu) != nullptr);
  CHECK(wrap.FindOrMake(0xFFFFFFF4u, &made, on_evict) == nullptr);  // 0xFFFFFFFC, 8 newer: outside.
  CHECK(evicted.empty());
  REQUIRE(wrap.FindOrMake(4, &made, on_evict) != nullptr);  // past 2^32: newer, so 0xFFFFFFFC goes.
  CHECK(made);
  CHECK(evicted == std::vector<uint32_t>{0xFFFFFFFCu});
}

}  // namespace
}  // namespace liveprof::corr_window_test
