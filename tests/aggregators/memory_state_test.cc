#include "aggregators/tf/memory_state.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "aggregators/catalog.h"
#include "event_builder.h"
#include "stream/diagnostics.h"

namespace liveprof::memory_state_test {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSec = 1'000'000'000;

// Names in every test's Catalog.
constexpr NameId kCaching = 1;          // "cuda_caching"
constexpr NameId kPinned = 2;           // "pinned_pool"
constexpr NameId kUndefined = 3;        // never defined: "#3"
constexpr NameId kCapacity = 10;        // "memory/cuda_caching/capacity_bytes"
constexpr NameId kReserved = 11;        // "memory/cuda_caching/reserved_bytes"
constexpr NameId kStack = 12;           // "memory/cuda_caching/stack_bytes"
constexpr NameId kPinnedReserved = 13;  // "memory/pinned_pool/reserved_bytes"
constexpr NameId kOtherCounter = 14;    // "gpu/utilization": not a memory counter.
constexpr NameId kBadCounter = 15;      // "memory//stack_bytes": no allocator name.
constexpr NameId kKernelName = 20;
constexpr NameId kOpConv = 21;    // "aten::conv"
constexpr NameId kOpEmpty = 22;   // "aten::empty"
constexpr NameId kStepName = 23;  // "ProfilerStep#3": a step, never an op.

void DefineNames(Catalog& c) {
  c.DefineName(kCaching, "cuda_caching");
  c.DefineName(kPinned, "pinned_pool");
  c.DefineName(kCapacity, "memory/cuda_caching/capacity_bytes");
  c.DefineName(kReserved, "memory/cuda_caching/reserved_bytes");
  c.DefineName(kStack, "memory/cuda_caching/stack_bytes");
  c.DefineName(kPinnedReserved, "memory/pinned_pool/reserved_bytes");
  c.DefineName(kOtherCounter, "gpu/utilization");
  c.DefineName(kBadCounter, "memory//stack_bytes");
  c.DefineName(kKernelName, "gemm");
  c.DefineName(kOpConv, "aten::conv");
  c.DefineName(kOpEmpty, "aten::empty");
  c.DefineName(kStepName, "ProfilerStep#3");
}

Event DeviceInfo(uint8_t device, uint64_t memory_bytes) {
  Event e;
  e.kind = EventKind::kDeviceInfo;
  e.device = device;
  e.payload.device_info.memory_bytes = memory_bytes;
  return e;
}

// A memory counter for `device` (the counter event's device field).
Event MemCounter(uint64_t ts, NameId name, double value, uint8_t device = 0) {
  Event e = test::Counter(ts, name, value);
  e.device = device;
  return e;
}

const MemoryStateSnapshot::Memory* Find(const MemoryStateSnapshot& s, std::string_view id) {
  for (const auto& m : s.memories) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

std::vector<uint64_t> TimelineTs(const MemoryStateSnapshot::Memory& m) {
  std::vector<uint64_t> ts;
  for (const auto& p : m.timeline) ts.push_back(p.ts_ns);
  return ts;
}

}  // namespace

TEST_CASE("memory state: memory id scheme") {
  Catalog catalog;
  DefineNames(catalog);
  MemoryState state(&catalog);
  const std::vector<Event> events = {
      test::Alloc(1, kCaching, 0x100, 8, MemoryKind::kDevice, 0),
      test::Alloc(2, kCaching, 0x100, 8, MemoryKind::kManaged, 1),
      test::Alloc(3, kPinned, 0x100, 8, MemoryKind::kPinned, 0),
      test::Alloc(4, kPinned, 0x200, 8, MemoryKind::kPageable, 3),  // host: device ignored.
      test::Alloc(5, kUndefined, 0x100, 8, MemoryKind::kHost, 0),
      test::Alloc(6, kCaching, 0x300, 8, MemoryKind::kUnknown, 0),
  };
  state.Consume(events);
  const MemoryStateSnapshot s = state.Snapshot();
  std::vector<std::string> ids;
  for (const auto& m : s.memories) ids.push_back(m.id);
  // Sorted by id.
  CHECK(ids == std::vector<std::string>{"GPU:0 cuda_caching", "GPU:1 cuda_caching", "Host #3", "Host cuda_caching",
                                        "Host pinned_pool"});
  const auto* pinned = Find(s, "Host pinned_pool");
  REQUIRE(pinned != nullptr);
  CHECK(pinned->host);
  CHECK(pinned->device == 0);
  CHECK(pinned->allocator == "pinned_pool");
  CHECK(pinned->live_allocations == 2);  // kPinned and kPageable share it.
  CHECK(pinned->heap_bytes == 16);
  const auto* gpu1 = Find(s, "GPU:1 cuda_caching");
  REQUIRE(gpu1 != nullptr);
  CHECK_FALSE(gpu1->host);
  CHECK(gpu1->device == 1);
}

TEST_CASE("memory state: hand-computed peak, stack/heap/free and fragmentation") {
  Catalog catalog;
  DefineNames(catalog);
  Diagnostics diag;
  MemoryState state(&catalog, &diag);
  constexpr uint64_t kT1 = 1 * kSec, kT2 = 2 * kSec, kT3 = 3 * kSec, kT4 = 4 * kSec, kT5 = 5 * kSec, kT6 = 6 * kSec;
  const std::vector<Event> events = {
      MemCounter(0, kCapacity, 1000),       MemCounter(0, kReserved, 600),
      test::Alloc(kT1, kCaching, 0, 100),    // A [0,100)
      test::Alloc(kT2, kCaching, 150, 100),  // B [150,250)
      test::Alloc(kT3, kCaching, 250, 150),  // X [250,400)
      test::Alloc(kT4, kCaching, 400, 100),  // C [400,500): heap 450, the peak.
      test::Free(kT5, kCaching, 250),        // X freed (bytes 0: size from the live map).
      MemCounter(kT6, kStack, 20),           // stack now 20; not a peak candidate.
  };
  state.Consume(events);
  const MemoryStateSnapshot s = state.Snapshot();
  REQUIRE(s.memories.size() == 1);
  const auto& m = s.memories[0];
  CHECK(m.id == "GPU:0 cuda_caching");
  CHECK(m.num_allocations == 4);
  CHECK(m.num_deallocations == 1);
  CHECK(m.capacity_bytes == 1000);
  CHECK(m.reserved_bytes == std::optional<uint64_t>(600));
  // Now: live [0,100) [150,250) [400,500) → heap 300; stack 20;
  // free = capacity − stack − heap = 1000 − 20 − 300 = 680.
  CHECK(m.live_allocations == 3);
  CHECK(m.heap_bytes == 300);
  CHECK(m.stack_bytes == 20);
  CHECK(m.free_bytes == 680);
  // Fragmentation now: region [0, max(500, 0 + 600)) = [0, 600); gaps
  // [100,150) = 50, [250,400) = 150, [500,600) = 100 → free 300, largest 150:
  // (300 − 150) / 300 = 50 %.
  CHECK(m.fragmentation_pct == 50.0);
  // Peak at kT4: stack 0 + heap 450; free 1000 − 0 − 450 = 550. Gaps then:
  // [100,150) = 50 and [500,600) = 100 → (150 − 100) / 150 = 33.3 %. It was
  // computed at kT4 (kT4 − kT3 = 1 s ≥ the 100 ms rate limit).
  CHECK(m.has_peak);
  CHECK(m.peak_bytes == 450);
  CHECK(m.peak_ts_ns == kT4);
  CHECK(m.peak_stack_bytes == 0);
  CHECK(m.peak_heap_bytes == 450);
  CHECK(m.peak_free_bytes == 550);
  REQUIRE(m.peak_fragmentation_pct.has_value());
  CHECK(*m.peak_fragmentation_pct == 100.0 * 50 / 150);
  CHECK(m.peak_fragmentation_ts_ns == kT4);
  CHECK(m.lifetime_peak_heap_bytes == 450);
  CHECK(m.lifetime_peak_heap_ts_ns == kT4);
  // Timeline: one point per alloc/free (5); each was a peak but the free.
  REQUIRE(m.timeline.size() == 5);
  CHECK(TimelineTs(m) == std::vector<uint64_t>{kT1, kT2, kT3, kT4, kT5});
  CHECK(m.timeline[3].heap_bytes == 450);
  CHECK(m.timeline[3].free_bytes == 550);
  CHECK(m.timeline[3].fragmentation_pct == std::optional<double>(100.0 * 50 / 150));
  CHECK_FALSE(m.timeline[4].fragmentation_pct.has_value());  // not a peak.
  // Breakdown at the peak: 100 × 3 = 300 and 150 × 1 = 150.
  CHECK(m.breakdown_at_peak);
  REQUIRE(m.breakdown.size() == 2);
  CHECK(m.breakdown[0] == MemoryStateSnapshot::BreakdownRow{"", 100, 3, 300});
  CHECK(m.breakdown[1] == MemoryStateSnapshot::BreakdownRow{"", 150, 1, 150});
  CHECK(diag.Get(Diag::free_unknown_address) == 0);
}

TEST_CASE("memory state: the stack counter counts in the peak (stack + heap)") {
  Catalog catalog;
  DefineNames(catalog);
  MemoryState state(&catalog);
  const std::vector<Event> events = {
      test::Alloc(1 * kSec, kCaching, 0x1000, 400),  // in-use 0 + 400.
      test::Free(2 * kSec, kCaching, 0x1000),        // 0.
      MemCounter(3 * kSec, kStack, 300),
      test::Alloc(4 * kSec, kCaching, 0x1000, 200),  // in-use 300 + 200 = 500: new peak.
  };
  state.Consume(events);
  const auto m = state.Snapshot().memories.at(0);
  CHECK(m.peak_bytes == 500);
  CHECK(m.peak_stack_bytes == 300);
  CHECK(m.peak_heap_bytes == 200);
  CHECK(m.peak_ts_ns == 4 * kSec);
  CHECK(m.lifetime_peak_heap_bytes == 400);  // heap alone.
  CHECK(m.lifetime_peak_heap_ts_ns == 1 * kSec);
}

TEST_CASE("memory state: lifetime peak vs window peak, carried-in level") {
  Catalog catalog;
  DefineNames(catalog);
  MemoryState state(&catalog);  // buckets of 1 s.
  state.Consume(std::vector<Event>{
      test::Alloc(500 * kMs, kCaching, 0xa, 300),   // 300: the lifetime peak.
      test::Free(600 * kMs, kCaching, 0xa),         // 0
      test::Alloc(1500 * kMs, kCaching, 0xb, 100),  // 100, held.
      test::Alloc(5500 * kMs, kCaching, 0xc, 50),   // 150
      test::Free(5700 * kMs, kCaching, 0xc),        // 100
  });
  {
    const auto all = state.Snapshot(0);
    const auto& m = all.memories.at(0);
    CHECK(all.now_ns == 5700 * kMs);
    CHECK(m.peak_bytes == 300);
    CHECK(m.peak_ts_ns == 500 * kMs);
    CHECK(m.num_allocations == 3);
    CHECK(m.num_deallocations == 2);
    CHECK(m.breakdown_at_peak);
    CHECK(m.lifetime_peak_heap_bytes == 300);
  }
  {
    // Last 2 s: now 5.7 s − 2 s = 3.7 s → buckets from 3 on: bucket 5 only,
    // seeded with the 100 carried in; its events reach 150 at 5.5 s.
    const auto w = state.Snapshot(2 * kSec);
    const auto& m = w.memories.at(0);
    CHECK(m.peak_bytes == 150);
    CHECK(m.peak_ts_ns == 5500 * kMs);
    CHECK(m.num_allocations == 1);
    CHECK(m.num_deallocations == 1);
    CHECK_FALSE(m.breakdown_at_peak);  // not the lifetime peak.
    CHECK(m.breakdown.empty());
    CHECK(m.lifetime_peak_heap_bytes == 300);  // lifetime, whatever the window.
    CHECK(TimelineTs(m) == std::vector<uint64_t>{5500 * kMs, 5700 * kMs});
  }
  // A kernel moves "now" to 10 s: no memory event in the last 2 s, the level
  // held since 5.7 s is the window's peak.
  state.Consume(std::vector<Event>{test::Kernel(9 * kSec, 1 * kSec, kKernelName)});
  {
    const auto m = state.Snapshot(2 * kSec).memories.at(0);
    CHECK(m.peak_bytes == 100);
    CHECK(m.peak_ts_ns == 5700 * kMs);
    CHECK(m.num_allocations == 0);
    CHECK(m.num_deallocations == 0);
    CHECK(m.timeline.empty());
  }
  state.Consume(std::vector<Event>{
      test::Alloc(10500 * kMs, kCaching, 0xd, 20),  // 120
      test::Free(11200 * kMs, kCaching, 0xd),       // 100
  });
  {
    // Last 100 ms: now 11.2 s → cutoff 11.1 s → bucket 11 only: seeded with
    // 120 (reached at 10.5 s, still held when the bucket opened), then 100.
    const auto m = state.Snapshot(100 * kMs).memories.at(0);
    CHECK(m.peak_bytes == 120);
    CHECK(m.peak_ts_ns == 10500 * kMs);
    CHECK(m.num_allocations == 0);
    CHECK(m.num_deallocations == 1);
  }
  CHECK(state.Snapshot(0).memories.at(0).peak_ts_ns == 500 * kMs);
}

TEST_CASE("memory state: the latest event reaching the peak wins (>=)") {
  Catalog catalog;
  DefineNames(catalog);
  MemoryState state(&catalog);
  constexpr uint64_t kT1 = 1 * kSec, kT2 = 2 * kSec, kT3 = 3 * kSec, kT4 = 4 * kSec, kT5 = 5 * kSec;
  state.Consume(std::vector<Event>{
      test::Alloc(kT1, kCaching, 0x10, 100),  // 100: peak.
      test::Free(kT2, kCaching, 0x10),        // 0
      test::Alloc(kT3, kCaching, 0x20, 100),  // 100 >= 100: the peak moves to kT3.
  });
  CHECK(state.Snapshot().memories.at(0).peak_ts_ns == kT3);
  state.Consume(std::vector<Event>{
      test::Alloc(kT4, kCaching, 0x30, 0),  // zero-byte alloc allowed: still 100.
      test::Free(kT5, kCaching, 0x30),      // 100 again.
  });
  const auto m = state.Snapshot().memories.at(0);
  CHECK(m.peak_bytes == 100);
  CHECK(m.peak_ts_ns == kT5);
  CHECK(m.lifetime_peak_heap_ts_ns == kT5);
  CHECK(m.num_allocations == 3);
  CHECK(m.num_deallocations == 2);
  CHECK(m.live_allocations == 1);
  // The peak's breakdown: the 100-byte allocation only (the 0-byte one is gone).
  CHECK(m.breakdown == std::vector<MemoryStateSnapshot::BreakdownRow>{{"", 100, 1, 100}});
}

TEST_CASE("memory state: free of an unknown address is counted, heap unchanged") {
  Catalog catalog;
  DefineNames(catalog);
  Diagnostics diag;
  MemoryState state(&catalog, &diag);
  state.Consume(std::vector<Event>{
      test::Alloc(1 * kSec, kCaching, 0x10, 100),  // peak 100
      test::Free(2 * kSec, kCaching, 0x99, 64),    // never allocated (before we attached).
  });
  {
    const auto m = state.Snapshot().memories.at(0);
    CHECK(diag.Get(Diag::free_unknown_address) == 1);
    CHECK(m.heap_bytes == 100);
    CHECK(m.num_deallocations == 1);
    CHECK(m.live_map_incomplete);
    CHECK(m.timeline.size() == 1);    // not a point...
    CHECK(m.peak_ts_ns == 1 * kSec);  // ...nor a peak candidate.
    // The 64 bytes were live at the peak (freed after it) but never seen.
    CHECK(m.breakdown == std::vector<MemoryStateSnapshot::BreakdownRow>{{"", 100, 1, 100}});
    CHECK(m.peak_unseen_allocations == 1);
    CHECK(m.peak_unseen_bytes == 64);
  }
  state.Consume(std::vector<Event>{test::Alloc(3 * kSec, kCaching, 0x20, 200)});  // peak 300
  const auto m = state.Snapshot().memories.at(0);
  CHECK(m.peak_bytes == 300);
  // The unknown free came before this peak: nothing unseen at it (no row
  // of 0 bytes); the live map is still known to be incomplete.
  CHECK(m.breakdown == std::vector<MemoryStateSnapshot::BreakdownRow>{{"", 200, 1, 200}, {"", 100, 1, 100}});
  CHECK(m.peak_unseen_allocations == 0);
  CHECK(m.peak_unseen_bytes == 0);
  CHECK(m.live_map_incomplete);
  // A memory id whose first event is an unknown free: counted, no peak.
  state.Consume(std::vector<Event>{test::Free(4 * kSec, kPinned, 0x5, 8, MemoryKind::kPinned)});
  const auto after = state.Snapshot();
  const auto* pinned = Find(after, "Host pinned_pool");
  REQUIRE(pinned != nullptr);
  CHECK_FALSE(pinned->has_peak);
  CHECK(pinned->num_deallocations == 1);
  CHECK(pinned->breakdown.empty());
  CHECK(diag.Get(Diag::free_unknown_address) == 2);
}

TEST_CASE("memory state: an alloc at a live address frees the earlier one") {
  Catalog catalog;
  DefineNames(catalog);
  Diagnostics diag;
  MemoryState state(&catalog, &diag);
  state.Consume(std::vector<Event>{
      test::Alloc(1 * kSec, kCaching, 0x10, 100),
      test::Alloc(2 * kSec, kCaching, 0x10, 40),  // reused: 100 taken as freed; heap 40.
  });
  const auto m = state.Snapshot().memories.at(0);
  CHECK(diag.Get(Diag::alloc_address_reused) == 1);
  CHECK(m.heap_bytes == 40);
  CHECK(m.live_allocations == 1);
  CHECK(m.num_allocations == 2);
  CHECK(m.num_deallocations == 1);
  CHECK(m.peak_bytes == 100);
  CHECK(m.peak_ts_ns == 1 * kSec);
  CHECK(m.breakdown == std::vector<MemoryStateSnapshot::BreakdownRow>{{"", 100, 1, 100}});
  CHECK(m.timeline.size() == 2);
}

TEST_CASE("memory state: bad durations are counted and skipped") {
  Catalog catalog;
  DefineNames(catalog);
  Diagnostics diag;
  MemoryState state(&catalog, &diag);
  Event bad = test::Alloc(1 * kSec, kCaching, 0x10, 100);
  bad.dur = (uint64_t{1} << 62) + 1;
  state.Consume(std::vector<Event>{bad});
  CHECK(diag.Get(Diag::bad_duration) == 1);
  CHECK(state.Snapshot().memories.empty());
}

namespace {

// Feeds `values` as in-use levels: a stack counter set to v_i, then a
// zero-byte alloc at ts = i ms (a point with in-use = v_i + 0).
MemoryStateSnapshot::Memory FeedLevels(const std::vector<uint64_t>& values, size_t max_points) {
  Catalog catalog;
  DefineNames(catalog);
  MemoryStateOptions options;
  options.max_points = max_points;
  MemoryState state(&catalog, nullptr, options);
  std::vector<Event> events;
  for (size_t i = 0; i < values.size(); ++i) {
    events.push_back(MemCounter(i * kMs, kStack, static_cast<double>(values[i])));
    events.push_back(test::Alloc(i * kMs, kCaching, 0x1000 + i, 0));
  }
  state.Consume(events);
  return state.Snapshot().memories.at(0);
}

std::vector<uint64_t> PointIndices(const MemoryStateSnapshot::Memory& m) {
  std::vector<uint64_t> indices;
  for (const auto& p : m.timeline) indices.push_back(p.ts_ns / kMs);
  return indices;
}

}  // namespace

TEST_CASE("memory state: timeline downsampling, exact box rule") {
  SUBCASE("19 events into 10 points: xprof's box rule on the raw events") {
    // v_i = 7i mod 19: 0 7 14 2 9 16 4 11 18 6 13 1 8 15 3 10 17 5 12.
    std::vector<uint64_t> v;
    for (uint64_t i = 0; i < 19; ++i) v.push_back(7 * i % 19);
    const auto m = FeedLevels(v, 10);
    // n = 19, w = ⌊19/10⌋ = 1; 10·(1+1) − 19 = 1 box of width 1: [0]; then 9
    // boxes of width 2: [1,3) [3,5) ... [17,19). Largest of each:
    // [0]→0; 7,14→2; 2,9→4; 16,4→5; 11,18→8; 6,13→10; 1,8→12; 15,3→13;
    // 10,17→16; 5,12→18.
    CHECK(PointIndices(m) == std::vector<uint64_t>{0, 2, 4, 5, 8, 10, 12, 13, 16, 18});
    CHECK(m.timeline[4].stack_bytes == 18);
  }
  SUBCASE("ties keep the earliest in each box") {
    const auto m = FeedLevels(std::vector<uint64_t>(19, 5), 10);
    CHECK(PointIndices(m) == std::vector<uint64_t>{0, 1, 3, 5, 7, 9, 11, 13, 15, 17});
  }
  SUBCASE("exactly max_points events are all kept") {
    std::vector<uint64_t> v;
    for (uint64_t i = 0; i < 10; ++i) v.push_back(i);
    CHECK(PointIndices(FeedLevels(v, 10)) == std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  }
  SUBCASE("45 events: the pyramid holds groups of 4, then the box rule") {
    // Pairs merge at 20 stored points (after event 20: 10 points of 2) and
    // again at event 40 (10 points of 4). After 45 events: 11 points of 4
    // ([0,4) ... [40,44)) plus a partial one ([44]) = 12 stored points.
    // Box rule on 12 into 10: w = 1; 10·2 − 12 = 8 boxes of one point
    // (events [0,4) ... [28,32)), then 2 boxes of two points ([32,40), [40,45)).
    // v_i = 7i mod 45:
    //   [0,4): 0 7 14 21 → 3        [4,8): 28 35 42 4 → 6
    //   [8,12): 11 18 25 32 → 11    [12,16): 39 1 8 15 → 12
    //   [16,20): 22 29 36 43 → 19   [20,24): 5 12 19 26 → 23
    //   [24,28): 33 40 2 9 → 25     [28,32): 16 23 30 37 → 31
    //   [32,40): 44 ... → 32        [40,45): 10 17 24 31 38 → 44
    std::vector<uint64_t> v;
    for (uint64_t i = 0; i < 45; ++i) v.push_back(7 * i % 45);
    const auto m = FeedLevels(v, 10);
    CHECK(PointIndices(m) == std::vector<uint64_t>{3, 6, 11, 12, 19, 23, 25, 31, 32, 44});
  }
}

TEST_CASE("memory state: breakdown at the peak by allocation size") {
  Catalog catalog;
  DefineNames(catalog);
  MemoryStateOptions options;
  options.breakdown_rows = 3;
  MemoryState state(&catalog, nullptr, options);
  std::vector<Event> events;
  uint64_t ts = 0;
  uint64_t address = 0x10000;
  auto alloc = [&](uint64_t bytes) {
    events.push_back(test::Alloc(++ts * kMs, kCaching, address, bytes));
    address += 0x10000;
    return address - 0x10000;
  };
  for (int i = 0; i < 4; ++i) alloc(256);   // 4 × 256 = 1024
  for (int i = 0; i < 2; ++i) alloc(1024);  // 2 × 1024 = 2048
  const uint64_t big = alloc(4096);         // 1 × 4096 = 4096
  alloc(512);
  alloc(512);  // 2 × 512 = 1024 (ties 256's total)
  alloc(8);    // 1 × 8 = 8: cut by breakdown_rows... see below.
  // Peak: 1024 + 2048 + 4096 + 1024 + 8 = 8200. Then free the 4096 block:
  // lower, so the breakdown stays the peak's.
  events.push_back(test::Free(++ts * kMs, kCaching, big));
  state.Consume(events);
  {
    const auto m = state.Snapshot().memories.at(0);
    CHECK(m.peak_bytes == 8200);
    // Total descending, then size descending: 4096, 2048 (1024 × 2), 1024
    // (512 × 2) before 1024 (256 × 4); top 3 rows.
    CHECK(m.breakdown ==
          std::vector<MemoryStateSnapshot::BreakdownRow>{{"", 4096, 1, 4096}, {"", 1024, 2, 2048}, {"", 512, 2, 1024}});
  }
  // More than 4096 histogram changes below the peak overflow the delta log;
  // the next peak copies the histogram instead: still exact.
  events.clear();
  for (int i = 0; i < 3000; ++i) {
    events.push_back(test::Alloc(++ts * kMs, kCaching, 0x7000000, 64));
    events.push_back(test::Free(++ts * kMs, kCaching, 0x7000000));
  }
  alloc(8192);  // 4104 + 8192 = 12296: a new peak.
  state.Consume(events);
  const auto m = state.Snapshot().memories.at(0);
  CHECK(m.peak_bytes == 12296);
  CHECK(m.breakdown ==
        std::vector<MemoryStateSnapshot::BreakdownRow>{{"", 8192, 1, 8192}, {"", 1024, 2, 2048}, {"", 512, 2, 1024}});
}

TEST_CASE("memory state: capacity from a kDeviceInfo via the Catalog") {
  Catalog catalog;
  DefineNames(catalog);
  constexpr uint64_t kGiB16 = uint64_t{16} << 30;
  MemoryState state(&catalog);
  // The device is not described yet: capacity unknown, free 0.
  state.Consume(std::vector<Event>{test::Alloc(1 * kSec, kCaching, 0x10, 1000, MemoryKind::kDevice, 1)});
  CHECK(state.Snapshot().memories.at(0).capacity_bytes == 0);
  CHECK(state.Snapshot().memories.at(0).free_bytes == 0);
  // The pipeline feeds the Catalog first; the next batch sees the device.
  const std::vector<Event> batch = {
      DeviceInfo(1, kGiB16),
      test::Alloc(2 * kSec, kCaching, 0x20, 24, MemoryKind::kDevice, 1),
      test::Alloc(3 * kSec, kCaching, 0x20, 24, MemoryKind::kHost, 0),
  };
  catalog.Consume(batch);
  state.Consume(batch);
  const auto snap = state.Snapshot();
  const auto* gpu = Find(snap, "GPU:1 cuda_caching");
  REQUIRE(gpu != nullptr);
  CHECK(gpu->capacity_bytes == kGiB16);
  CHECK(gpu->free_bytes == kGiB16 - 1024);  // 16 GiB − (1000 + 24).
  CHECK(gpu->peak_free_bytes == kGiB16 - 1024);
  const auto* host = Find(snap, "Host cuda_caching");
  REQUIRE(host != nullptr);
  CHECK(host->capacity_bytes == 0);  // device memory only.
  // A capacity counter for device 1 overrides the device's memory.
  state.Consume(std::vector<Event>{MemCounter(4 * kSec, kCapacity, 4096, 1)});
  CHECK(Find(state.Snapshot(), "GPU:1 cuda_caching")->capacity_bytes == 4096);
  CHECK(Find(state.Snapshot(), "GPU:1 cuda_caching")->free_bytes == 4096 - 1024);
}

TEST_CASE("memory state: counters contract") {
  Catalog catalog;
  DefineNames(catalog);
  MemoryState state(&catalog);
  state.Consume(std::vector<Event>{
      // Before the allocator's first alloc: applies when it appears.
      MemCounter(1 * kSec, kReserved, 5000, 0),
      MemCounter(1 * kSec, kStack, 100, 0),
      MemCounter(1 * kSec, kStack, 777, 1),     // device 1: not GPU:0's.
      MemCounter(1 * kSec, kOtherCounter, 99),  // not a memory counter.
      MemCounter(1 * kSec, kBadCounter, 55),    // no allocator name: ignored.
      MemCounter(1 * kSec, kPinnedReserved, 3000, 0),
      test::Alloc(2 * kSec, kCaching, 0x10, 1000),
      test::Alloc(2 * kSec, kPinned, 0x10, 1000, MemoryKind::kPinned),
  });
  {
    const auto snap = state.Snapshot();
    const auto* gpu = Find(snap, "GPU:0 cuda_caching");
    REQUIRE(gpu != nullptr);
    CHECK(gpu->stack_bytes == 100);
    CHECK(gpu->capacity_bytes == 0);  // no kDeviceInfo, no capacity counter.
    CHECK(gpu->reserved_bytes == std::optional<uint64_t>(5000));
    CHECK(gpu->free_bytes == 4000);  // capacity unknown: reserved − heap = 5000 − 1000.
    CHECK(gpu->peak_bytes == 1100);  // stack 100 + heap 1000.
    // Fragmentation: one allocation [0x10, 0x10 + 1000) in a region of 5000:
    // one gap (the tail), the largest: 0 %.
    CHECK(gpu->fragmentation_pct == 0.0);
    const auto* pinned = Find(snap, "Host pinned_pool");
    REQUIRE(pinned != nullptr);
    CHECK(pinned->free_bytes == 2000);  // 3000 − 1000.
    CHECK(pinned->stack_bytes == 0);
  }
  state.Consume(std::vector<Event>{
      MemCounter(3 * kSec, kStack, -5),        // negative reads as 0.
      MemCounter(3 * kSec, kCapacity, 10000),  // capacity known: it wins over reserved.
  });
  const auto after = state.Snapshot();
  const auto* gpu = Find(after, "GPU:0 cuda_caching");
  REQUIRE(gpu != nullptr);
  CHECK(gpu->stack_bytes == 0);
  CHECK(gpu->free_bytes == 9000);
  // Without a catalog: names read "#id", counters cannot be read.
  MemoryState bare(nullptr);
  bare.Consume(std::vector<Event>{MemCounter(1, kStack, 10), test::Alloc(2, kCaching, 1, 8)});
  const auto b = bare.Snapshot().memories.at(0);
  CHECK(b.id == "GPU:0 #1");
  CHECK(b.stack_bytes == 0);
}

TEST_CASE("memory state: fragmentation at peaks is rate-limited") {
  Catalog catalog;
  DefineNames(catalog);
  MemoryState state(&catalog);  // 100 ms interval.
  state.Consume(std::vector<Event>{
      test::Alloc(0, kCaching, 0, 100),           // peak: computed (first), 0 %.
      test::Alloc(10 * kMs, kCaching, 200, 100),  // peak within 100 ms: not computed.
      test::Free(20 * kMs, kCaching, 200),
  });
  {
    const auto m = state.Snapshot().memories.at(0);
    CHECK(m.peak_ts_ns == 10 * kMs);
    // The latest computed value (at t = 0) stands in, and says when it was taken.
    CHECK(m.peak_fragmentation_pct == std::optional<double>(0.0));
    CHECK(m.peak_fragmentation_ts_ns == 0);
  }
  state.Consume(std::vector<Event>{
      test::Alloc(30 * kMs, kCaching, 300, 100),  // [0,100) [300,400): peak, still limited.
  });
  {
    // Nothing changed since this peak: the snapshot measures it exactly.
    // Gap [100,300) is the only and largest: 0 %.
    const auto m = state.Snapshot().memories.at(0);
    CHECK(m.peak_ts_ns == 30 * kMs);
    CHECK(m.peak_fragmentation_ts_ns == 30 * kMs);
  }
  state.Consume(std::vector<Event>{
      test::Alloc(150 * kMs, kCaching, 450, 100),  // 150 ms ≥ 100 ms: computed.
      test::Free(160 * kMs, kCaching, 450),
  });
  // At 150 ms: [0,100) [300,400) [450,550): gaps 200 and 50 → 50 / 250 = 20 %.
  const auto m = state.Snapshot().memories.at(0);
  CHECK(m.peak_ts_ns == 150 * kMs);
  CHECK(m.peak_fragmentation_pct == std::optional<double>(100.0 * 50 / 250));
  CHECK(m.peak_fragmentation_ts_ns == 150 * kMs);
}

TEST_CASE("memory state: JSON and CSV") {
  Catalog catalog;
  DefineNames(catalog);
  MemoryState state(&catalog);
  state.Consume(std::vector<Event>{
      MemCounter(0, kReserved, 1000),
      test::Alloc(1 * kSec, kCaching, 0, 100),
      test::Alloc(2 * kSec, kCaching, 200, 300),
      test::Free(3 * kSec, kCaching, 0),
      test::Alloc(4 * kSec, kPinned, 0x10, 8, MemoryKind::kPinned),
  });
  const MemoryStateSnapshot s = state.Snapshot();
  JsonWriter w;
  s.WriteJson(w);
  const auto j = nlohmann::json::parse(w.str());
  CHECK(j["window_ns"] == 0);
  CHECK(j["now_ns"] == 4 * kSec);
  REQUIRE(j["memories"].size() == 2);
  const auto& gpu = j["memories"][0];
  CHECK(gpu["id"] == "GPU:0 cuda_caching");
  CHECK(gpu["peak_bytes"] == 400);
  CHECK(gpu["reserved_bytes"] == 1000);
  CHECK(gpu["breakdown"][0]["bytes"] == 300);
  CHECK(gpu["timeline"]["heap_bytes"] == nlohmann::json::array({100, 400, 300}));
  CHECK(gpu["timeline"]["fragmentation_pct"][2].is_null());
  CHECK(j["memories"][1]["reserved_bytes"].is_null());
  const std::string csv = s.ToCsv();
  CHECK(csv.starts_with("id,num_allocations,num_deallocations,capacity_bytes,reserved_bytes,"));
  CHECK(csv.find("\nGPU:0 cuda_caching,2,1,0,1000,400,400,2000000000,0,400,600,") != std::string::npos);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);
}

// ---------------------------------------------------------------------------
// Incremental equals batch, and both equal a naive reference.

namespace {

double NaiveFragmentation(const std::map<uint64_t, uint64_t>& live, bool has_reserved, uint64_t reserved) {
  if (live.empty()) return 0;
  const uint64_t lowest = live.begin()->first;
  uint64_t end = lowest, free = 0, largest = 0;
  for (const auto& [address, bytes] : live) {  // std::map: address order.
    if (address > end) {
      free += address - end;
      largest = std::max(largest, address - end);
    }
    end = std::max(end, address + bytes);
  }
  if (has_reserved && lowest + reserved > end) {
    free += lowest + reserved - end;
    largest = std::max(largest, lowest + reserved - end);
  }
  return free == 0 ? 0 : 100.0 * static_cast<double>(free - largest) / static_cast<double>(free);
}

// Keeps every event; answers a snapshot by recomputing from scratch.
class NaiveMemory {
 public:
  NaiveMemory(const Catalog* catalog, MemoryStateOptions options) : catalog_(catalog), options_(options) {}

  void Consume(const std::vector<Event>& events) {
    for (const Event& e : events) {
      now_ = std::max(now_, e.end());
      if (e.kind == EventKind::kCounter) {
        OnCounter(e);
      } else if (e.kind == EventKind::kAlloc || e.kind == EventKind::kFree) {
        OnMemory(e);
      } else if (e.kind == EventKind::kFrameworkOp || e.kind == EventKind::kHostSpan ||
                 e.kind == EventKind::kInputSpan) {
        OnSpan(e);
      }
    }
  }

  MemoryStateSnapshot Snapshot(uint64_t window_ns) const {
    MemoryStateSnapshot snap;
    snap.window_ns = window_ns;
    snap.now_ns = now_;
    const uint64_t cutoff = window_ns == 0 || now_ <= window_ns ? 0 : now_ - window_ns;
    const uint64_t first = cutoff / options_.bucket_ns;
    for (const auto& [key, m] : mems_) {
      const Config c = ConfigOf(m);
      MemoryStateSnapshot::Memory out;
      out.allocator = m.allocator;
      out.host = m.host;
      out.device = m.device;
      out.id = (m.host ? "Host " : "GPU:" + std::to_string(m.device) + " ") + m.allocator;
      out.capacity_bytes = c.capacity;
      if (c.has_reserved) out.reserved_bytes = c.reserved;
      out.live_allocations = m.live.size();
      out.stack_bytes = c.stack;
      out.heap_bytes = Heap(m.live);
      out.free_bytes = FreeOf(c, out.heap_bytes);
      out.fragmentation_pct = NaiveFragmentation(m.live, c.has_reserved, c.reserved);
      out.live_map_incomplete = !m.unknown_frees.empty();
      const Sample* lifetime = nullptr;   // last sample of largest in-use.
      const Sample* heap_peak = nullptr;  // last sample of largest heap.
      const Sample* last_computed = nullptr;
      for (const Sample& s : m.samples) {
        if (lifetime == nullptr || s.in_use() >= lifetime->in_use()) lifetime = &s;
        if (heap_peak == nullptr || s.heap >= heap_peak->heap) heap_peak = &s;
        if (!std::isnan(s.frag)) last_computed = &s;
      }
      if (heap_peak != nullptr) {
        out.lifetime_peak_heap_bytes = heap_peak->heap;
        out.lifetime_peak_heap_ts_ns = heap_peak->ts;
      }
      for (const auto& ev : m.events) {
        if (window_ns != 0 && ev.bucket < first) continue;
        out.num_allocations += ev.allocs;
        out.num_deallocations += ev.frees;
      }
      // Window peak: the level carried in (last sample before the window)
      // and every sample in it; the latest of the largest.
      const Sample* peak = nullptr;
      for (const Sample& s : m.samples) {
        const bool in = window_ns == 0 || s.bucket >= first;
        const bool carried = !in && (&s == &m.samples.back() || (&s + 1)->bucket >= first);
        if ((in || carried) && (peak == nullptr || s.in_use() >= peak->in_use())) peak = &s;
      }
      if (peak != nullptr) {
        out.has_peak = true;
        out.peak_bytes = peak->in_use();
        out.peak_ts_ns = peak->ts;
        out.peak_stack_bytes = peak->stack;
        out.peak_heap_bytes = peak->heap;
        out.peak_free_bytes = peak->free;
        const bool is_lifetime = peak == lifetime;
        if (!std::isnan(peak->frag)) {
          out.peak_fragmentation_pct = peak->frag;
          out.peak_fragmentation_ts_ns = peak->ts;
        } else if (is_lifetime && lifetime == &m.samples.back()) {
          out.peak_fragmentation_pct = out.fragmentation_pct;
          out.peak_fragmentation_ts_ns = peak->ts;
        } else if (is_lifetime && last_computed != nullptr) {
          out.peak_fragmentation_pct = last_computed->frag;
          out.peak_fragmentation_ts_ns = last_computed->ts;
        }
        if (is_lifetime) {
          out.breakdown_at_peak = true;
          // The op of each allocation live at the peak, as known now.
          std::map<std::pair<std::string, uint64_t>, uint64_t> rows;
          std::map<std::string, MemoryStateSnapshot::OpRow> by_op;
          for (const auto& [address, id] : m.live_at_peak.at(peak->seq)) {
            const NameId op = allocs_[id].op;
            const std::string name = op == 0 ? "" : std::string(catalog_->Name(op));
            const uint64_t bytes = allocs_[id].bytes;
            ++rows[{name, bytes}];
            by_op[name].op = name;
            by_op[name].bytes += bytes;
            ++by_op[name].allocations;
            ++out.peak_allocations;
            if (op != 0) {
              ++out.peak_attributed_allocations;
              out.peak_attributed_bytes += bytes;
            }
          }
          for (const auto& [key, count] : rows) {
            out.breakdown.push_back({key.first, key.second, count, key.second * count});
          }
          std::sort(out.breakdown.begin(), out.breakdown.end(), [](const auto& a, const auto& b) {
            if (a.total_bytes != b.total_bytes) return a.total_bytes > b.total_bytes;
            return a.bytes != b.bytes ? a.bytes > b.bytes : a.op < b.op;
          });
          if (out.breakdown.size() > options_.breakdown_rows) {
            out.breakdown.resize(options_.breakdown_rows);
          }
          for (const auto& [name, r] : by_op) out.breakdown_by_op.push_back(r);
          std::stable_sort(out.breakdown_by_op.begin(), out.breakdown_by_op.end(),
                           [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
          if (out.breakdown_by_op.size() > options_.breakdown_rows) {
            out.breakdown_by_op.resize(options_.breakdown_rows);
          }
          for (const auto& [samples_before, bytes] : m.unknown_frees) {
            if (samples_before > peak->seq) {
              ++out.peak_unseen_allocations;
              out.peak_unseen_bytes += bytes;
            }
          }
        }
      }
      // Timeline: groups of 2^k events, k the smallest with ⌊n/2^k⌋ < 2·max;
      // each group's first largest; groups in the window; then the box rule.
      const size_t n = m.samples.size();
      const size_t max = options_.max_points;
      size_t k = 0;
      while ((n >> k) >= 2 * max) ++k;
      std::vector<const Sample*> groups;
      for (size_t g = 0; (g << k) < n; ++g) {
        const Sample* best = &m.samples[g << k];
        for (size_t i = (g << k) + 1; i < std::min(n, (g + 1) << k); ++i) {
          if (m.samples[i].in_use() > best->in_use()) best = &m.samples[i];
        }
        if (window_ns == 0 || best->ts / options_.bucket_ns >= first) groups.push_back(best);
      }
      std::vector<const Sample*> chosen;
      if (groups.size() <= max) {
        chosen = groups;
      } else {
        const size_t w = groups.size() / max;
        const size_t narrow = max * (w + 1) - groups.size();
        size_t begin = 0;
        for (size_t box = 0; box < max; ++box) {
          const size_t width = box < narrow ? w : w + 1;
          const Sample* best = groups[begin];
          for (size_t i = begin + 1; i < begin + width; ++i) {
            if (groups[i]->in_use() > best->in_use()) best = groups[i];
          }
          chosen.push_back(best);
          begin += width;
        }
      }
      for (const Sample* s : chosen) {
        MemoryStateSnapshot::Point p{s->ts, s->stack, s->heap, s->free, std::nullopt};
        if (!std::isnan(s->frag)) p.fragmentation_pct = s->frag;
        out.timeline.push_back(p);
      }
      snap.memories.push_back(std::move(out));
    }
    std::sort(snap.memories.begin(), snap.memories.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    return snap;
  }

  uint64_t unknown_frees = 0;
  uint64_t reused = 0;

 private:
  struct Sample {
    uint64_t ts, seq, stack, heap, free;
    double frag;
    uint64_t bucket;
    uint64_t in_use() const { return stack + heap; }
  };
  struct Ev {
    uint64_t bucket;
    uint64_t allocs, frees;
  };
  struct Mem {
    std::string allocator;
    bool host;
    uint8_t device;
    std::map<uint64_t, uint64_t> live;
    std::vector<Sample> samples;
    std::vector<Ev> events;
    std::vector<std::pair<uint64_t, uint64_t>> unknown_frees;       // (samples before, bytes)
    std::map<uint64_t, uint64_t> live_ids;                          // address -> index in allocs_.
    std::map<uint64_t, std::map<uint64_t, uint64_t>> live_at_peak;  // by seq: live_ids.
    // Online state of the fragmentation rate limit.
    bool any_peak = false;
    uint64_t running_peak = 0;
    bool frag_done = false;
    uint64_t frag_ts = 0;
  };
  struct Setting {
    uint64_t capacity = 0;
    bool has_reserved = false;
    uint64_t reserved = 0;
    uint64_t stack = 0;
  };
  struct Config {
    uint64_t capacity, stack, reserved;
    bool has_reserved;
  };

  static uint64_t Heap(const std::map<uint64_t, uint64_t>& live) {
    uint64_t sum = 0;
    for (const auto& [address, bytes] : live) sum += bytes;
    return sum;
  }
  static uint64_t FreeOf(const Config& c, uint64_t heap) {
    if (c.capacity > 0) return c.capacity > c.stack + heap ? c.capacity - c.stack - heap : 0;
    if (c.has_reserved) return c.reserved > heap ? c.reserved - heap : 0;
    return 0;
  }
  Config ConfigOf(const Mem& m) const {
    Config c{0, 0, 0, false};
    auto it = settings_.find({m.allocator, m.device});
    if (it != settings_.end()) {
      c.stack = it->second.stack;
      c.has_reserved = it->second.has_reserved;
      c.reserved = it->second.reserved;
      c.capacity = it->second.capacity;
    }
    if (c.capacity == 0 && !m.host && catalog_->Device(m.device) != nullptr) {
      c.capacity = catalog_->Device(m.device)->memory_bytes;
    }
    return c;
  }

  void OnCounter(const Event& e) {
    const std::string name(catalog_->Name(e.name));
    for (const char* suffix : {"/capacity_bytes", "/reserved_bytes", "/stack_bytes"}) {
      const std::string sfx = suffix;
      if (name.starts_with("memory/") && name.ends_with(sfx) && name.size() > 7 + sfx.size()) {
        Setting& s = settings_[{name.substr(7, name.size() - 7 - sfx.size()), e.device}];
        const auto v = static_cast<uint64_t>(std::max(0.0, e.payload.counter.value));
        if (sfx == "/capacity_bytes") s.capacity = v;
        if (sfx == "/reserved_bytes") {
          s.has_reserved = true;
          s.reserved = v;
        }
        if (sfx == "/stack_bytes") s.stack = v;
      }
    }
  }

  // Every allocation: its op is the first span to arrive after it whose
  // [ts, end) holds it on its track, unless an allocation on the track more
  // than the horizon later came first (it gave up).
  struct AllocRec {
    uint64_t ts;
    TrackId track;
    uint64_t bytes;
    NameId op = 0;
    bool done = false;
  };
  std::vector<AllocRec> allocs_;

  void OnSpan(const Event& e) {
    if (e.name == 0 || catalog_->Name(e.name).starts_with("ProfilerStep#")) return;
    for (AllocRec& a : allocs_) {
      if (!a.done && a.track == e.track && a.ts >= e.ts && a.ts < e.end()) {
        a.op = e.name;
        a.done = true;
      }
    }
  }

  void OnMemory(const Event& e) {
    const auto kind = static_cast<MemoryKind>(e.sub);
    const bool host = kind != MemoryKind::kDevice && kind != MemoryKind::kManaged;
    const uint8_t device = host ? 0 : e.device;
    Mem& m = mems_[{e.name, host, device}];
    if (m.allocator.empty()) {
      const std::string_view name = catalog_->Name(e.name);
      m.allocator = name.empty() ? "#" + std::to_string(e.name) : std::string(name);
      m.host = host;
      m.device = device;
    }
    const uint64_t bucket = e.end() / options_.bucket_ns;
    const uint64_t address = e.payload.memory.address;
    if (e.kind == EventKind::kAlloc) {
      const bool reuse = m.live.contains(address);
      reused += reuse;
      m.live[address] = e.payload.memory.bytes;
      m.live_ids[address] = allocs_.size();
      allocs_.push_back({e.ts, e.track, e.payload.memory.bytes});
      for (AllocRec& a : allocs_) {
        if (!a.done && a.track == e.track && a.ts + options_.attribution_horizon_ns < e.ts) {
          a.done = true;
        }
      }
      m.events.push_back({bucket, 1, reuse ? 1u : 0u});
    } else if (!m.live.contains(address)) {
      ++unknown_frees;
      m.unknown_frees.emplace_back(m.samples.size(), e.payload.memory.bytes);
      m.events.push_back({bucket, 0, 1});
      return;
    } else {
      m.live.erase(address);
      m.live_ids.erase(address);
      m.events.push_back({bucket, 0, 1});
    }
    const Config c = ConfigOf(m);
    Sample s{e.ts, m.samples.size(), c.stack, Heap(m.live), 0, std::numeric_limits<double>::quiet_NaN(), bucket};
    s.free = FreeOf(c, s.heap);
    if (!m.any_peak || s.in_use() >= m.running_peak) {
      m.any_peak = true;
      m.running_peak = s.in_use();
      m.live_at_peak[s.seq] = m.live_ids;
      if (!m.frag_done || (s.ts >= m.frag_ts && s.ts - m.frag_ts >= options_.peak_detail_interval_ns)) {
        s.frag = NaiveFragmentation(m.live, c.has_reserved, c.reserved);
        m.frag_done = true;
        m.frag_ts = s.ts;
      }
    }
    m.samples.push_back(s);
  }

  const Catalog* catalog_;
  MemoryStateOptions options_;
  uint64_t now_ = 0;
  std::map<std::tuple<NameId, bool, uint8_t>, Mem> mems_;
  std::map<std::pair<std::string, uint8_t>, Setting> settings_;
};

void CheckSame(const MemoryStateSnapshot& a, const MemoryStateSnapshot& b) {
  CHECK(a.window_ns == b.window_ns);
  CHECK(a.now_ns == b.now_ns);
  REQUIRE(a.memories.size() == b.memories.size());
  for (size_t i = 0; i < a.memories.size(); ++i) {
    const auto& x = a.memories[i];
    const auto& y = b.memories[i];
    INFO("memory ", x.id, " window ", a.window_ns);
    CHECK(x.id == y.id);
    CHECK(x.num_allocations == y.num_allocations);
    CHECK(x.num_deallocations == y.num_deallocations);
    CHECK(x.capacity_bytes == y.capacity_bytes);
    CHECK(x.reserved_bytes == y.reserved_bytes);
    CHECK(x.lifetime_peak_heap_bytes == y.lifetime_peak_heap_bytes);
    CHECK(x.lifetime_peak_heap_ts_ns == y.lifetime_peak_heap_ts_ns);
    CHECK(x.live_allocations == y.live_allocations);
    CHECK(x.stack_bytes == y.stack_bytes);
    CHECK(x.heap_bytes == y.heap_bytes);
    CHECK(x.free_bytes == y.free_bytes);
    CHECK(x.fragmentation_pct == y.fragmentation_pct);
    CHECK(x.has_peak == y.has_peak);
    CHECK(x.peak_bytes == y.peak_bytes);
    CHECK(x.peak_ts_ns == y.peak_ts_ns);
    CHECK(x.peak_stack_bytes == y.peak_stack_bytes);
    CHECK(x.peak_heap_bytes == y.peak_heap_bytes);
    CHECK(x.peak_free_bytes == y.peak_free_bytes);
    CHECK(x.peak_fragmentation_pct == y.peak_fragmentation_pct);
    CHECK(x.peak_fragmentation_ts_ns == y.peak_fragmentation_ts_ns);
    CHECK(x.breakdown_at_peak == y.breakdown_at_peak);
    CHECK(x.breakdown == y.breakdown);
    CHECK(x.breakdown_by_op == y.breakdown_by_op);
    CHECK(x.peak_allocations == y.peak_allocations);
    CHECK(x.peak_attributed_allocations == y.peak_attributed_allocations);
    CHECK(x.peak_attributed_bytes == y.peak_attributed_bytes);
    CHECK(x.peak_unseen_allocations == y.peak_unseen_allocations);
    CHECK(x.peak_unseen_bytes == y.peak_unseen_bytes);
    CHECK(x.live_map_incomplete == y.live_map_incomplete);
    CHECK(x.timeline.size() == y.timeline.size());
    CHECK(x.timeline == y.timeline);
  }
  CHECK(a == b);
}

}  // namespace

TEST_CASE("memory state: incremental equals batch equals a naive reference") {
  // How often the streams reach the paths worth checking (all must be > 0).
  int not_lifetime_peak = 0, stale_fragmentation = 0, unattributed = 0, carried_in = 0, downsampled = 0, attributed = 0,
      unattributed_at_peak = 0;
  for (const uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    INFO("seed ", seed);
    std::mt19937_64 rng(seed);
    Catalog catalog;
    DefineNames(catalog);
    catalog.Consume(std::vector<Event>{DeviceInfo(0, 1 << 20)});
    MemoryStateOptions options;
    options.bucket_ns = 1 * kSec;
    options.max_buckets = 8;  // evictions into "older" happen.
    options.max_points = 16;  // the pyramid merges.
    options.breakdown_rows = 3;
    options.attribution_horizon_ns = 3 * kSec;  // some allocations give up.
    // Which (allocator, kind, device) each event picks.
    struct Target {
      NameId name;
      MemoryKind kind;
      uint8_t device;
    };
    const Target targets[] = {{kCaching, MemoryKind::kDevice, 0},
                              {kCaching, MemoryKind::kDevice, 1},
                              {kPinned, MemoryKind::kPinned, 0},
                              {kUndefined, MemoryKind::kHost, 0}};
    const NameId counters[] = {kCapacity, kReserved, kStack, kPinnedReserved, kOtherCounter};
    const uint64_t sizes[] = {0, 100, 256, 512, 1024, 4096, 300};
    constexpr uint64_t kSlots = 48;
    std::vector<std::set<uint64_t>> live(std::size(targets));
    std::vector<Event> events;
    const int n = 500 + static_cast<int>(rng() % 2500);
    uint64_t ts = 0;
    for (int i = 0; i < n; ++i) {
      ts += rng() % (seed % 2 == 0 ? 300 * kMs : 40 * kMs);
      const size_t t = rng() % std::size(targets);
      const Target& target = targets[t];
      const uint64_t address = 0x10000 + (rng() % kSlots) * 0x400;  // 1 KiB slots.
      const uint32_t r = rng() % 100;
      if (r < 48) {  // alloc (at a live address now and then: reuse).
        events.push_back(
            test::Alloc(ts, target.name, address, sizes[rng() % std::size(sizes)], target.kind, target.device));
        events.back().track = static_cast<TrackId>(rng() % 3);
        live[t].insert(address);
      } else if (r < 90) {  // free a live address, or now and then an unknown one.
        uint64_t a = address;
        if (!live[t].empty() && rng() % 10 != 0) {
          auto it = live[t].begin();
          std::advance(it, static_cast<long>(rng() % live[t].size()));
          a = *it;
        }
        events.push_back(test::Free(ts, target.name, a, rng() % 2 == 0 ? 0 : 64, target.kind, target.device));
        live[t].erase(a);
      } else if (r < 93) {  // a span on a track around recent allocations.
        const NameId names[] = {kOpConv, kOpEmpty, kStepName, 0};
        const uint64_t back = rng() % (2 * kSec);
        const uint64_t start = ts > back ? ts - back : 0;
        events.push_back(test::Span(start, ts - start + rng() % (500 * kMs), names[rng() % std::size(names)],
                                    static_cast<TrackId>(rng() % 3),
                                    rng() % 2 == 0 ? EventKind::kFrameworkOp : EventKind::kHostSpan));
      } else if (r < 96) {
        events.push_back(MemCounter(ts, counters[rng() % std::size(counters)], static_cast<double>(rng() % 20000),
                                    static_cast<uint8_t>(rng() % 2)));
      } else {
        events.push_back(test::Kernel(ts, rng() % (2 * kSec), kKernelName));
      }
    }
    // Events arrive in completion order (the kernels end later).
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });

    Diagnostics diag_incremental, diag_batch;
    MemoryState incremental(&catalog, &diag_incremental, options);
    MemoryState batch(&catalog, &diag_batch, options);
    NaiveMemory naive(&catalog, options);
    batch.Consume(events);
    naive.Consume(events);
    size_t pos = 0;
    while (pos < events.size()) {
      const size_t len = std::min(events.size() - pos, static_cast<size_t>(1 + rng() % 200));
      incremental.Consume(std::span<const Event>(events).subspan(pos, len));
      pos += len;
      (void)incremental.Snapshot(0);
      (void)incremental.Snapshot(3 * kSec);
    }
    const uint64_t windows[] = {0, 3 * kSec, 500 * kMs, 7 * kSec};
    for (const uint64_t window : windows) {
      const MemoryStateSnapshot a = incremental.Snapshot(window);
      CheckSame(a, batch.Snapshot(window));
      CheckSame(a, naive.Snapshot(window));
      for (const auto& m : a.memories) {
        not_lifetime_peak += m.has_peak && !m.breakdown_at_peak;
        stale_fragmentation += m.peak_fragmentation_pct.has_value() && m.peak_fragmentation_ts_ns != m.peak_ts_ns;
        unattributed += m.peak_unseen_allocations > 0;
        attributed += m.peak_attributed_allocations > 0;
        unattributed_at_peak += m.peak_allocations > m.peak_attributed_allocations;
        carried_in += window != 0 && m.has_peak && m.peak_ts_ns + window < a.now_ns;
        downsampled += window == 0 && m.num_allocations + m.num_deallocations > 4 * 16;
      }
    }
    CHECK(diag_incremental.Get(Diag::free_unknown_address) == naive.unknown_frees);
    CHECK(diag_incremental.Get(Diag::alloc_address_reused) == naive.reused);
    CHECK(diag_batch.Get(Diag::free_unknown_address) == naive.unknown_frees);
    CHECK(naive.unknown_frees > 0);
    CHECK(naive.reused > 0);
  }
  CHECK(not_lifetime_peak > 0);
  CHECK(stale_fragmentation > 0);
  CHECK(unattributed > 0);
  CHECK(attributed > 0);
  CHECK(unattributed_at_peak > 0);
  CHECK(carried_in > 0);
  CHECK(downsampled > 0);
  MESSAGE("coverage: not_lifetime_peak=", not_lifetime_peak, " stale_fragmentation=", stale_fragmentation,
          " unattributed=", unattributed, " attributed=", attributed, " unattributed_at_peak=", unattributed_at_peak,
          " carried_in=", carried_in, " downsampled=", downsampled);
}

}  // namespace liveprof::memory_state_test
