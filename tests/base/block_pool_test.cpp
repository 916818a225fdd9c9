// BlockPool and PoolAllocator: a node map over the pool keeps what a plain
// one keeps, and the pool hands back the blocks it was given.
#include <cstdint>
#include <functional>
#include <random>
#include <unordered_map>
#include <utility>

#include "base/block_pool.h"
#include "doctest/doctest.h"

namespace liveprof {
namespace {

TEST_CASE("block pool: blocks are aligned, distinct, and reused last in first out") {
  BlockPool pool(20);
  CHECK(pool.block_bytes() == 32);
  void* a = pool.Get();
  void* b = pool.Get();
  CHECK(a != b);
  CHECK(reinterpret_cast<uintptr_t>(a) % BlockPool::kBlockAlign == 0);
  CHECK(reinterpret_cast<uintptr_t>(b) % BlockPool::kBlockAlign == 0);
  pool.Put(a);
  pool.Put(b);
  CHECK(pool.Get() == b);
  CHECK(pool.Get() == a);
  // Past one 64 KiB chunk.
  for (int i = 0; i < 5000; ++i) CHECK(pool.Get() != nullptr);
}

TEST_CASE("block pool: a node map over the pool equals a plain one under random inserts and erases") {
  struct Value {
    uint32_t row = 0;
    uint64_t ns = 0;
  };
  BlockPool pool(sizeof(void*) + sizeof(std::pair<const uint32_t, Value>) + sizeof(size_t));
  using Pooled = std::unordered_map<uint32_t, Value, std::hash<uint32_t>, std::equal_to<uint32_t>,
                                    PoolAllocator<std::pair<const uint32_t, Value>>>;
  Pooled pooled(0, Pooled::hasher(), Pooled::key_equal(), Pooled::allocator_type(&pool));
  std::unordered_map<uint32_t, Value> plain;
  std::mt19937 rng(7);
  for (int i = 0; i < 200'000; ++i) {
    const uint32_t key = rng() % 5000;
    if (rng() % 3 == 0) {
      CHECK(pooled.erase(key) == plain.erase(key));
    } else {
      const uint64_t ns = rng();
      pooled[key].ns += ns;
      plain[key].ns += ns;
    }
    if (i % 50'000 == 0) pooled.reserve(pooled.size() * 2 + 1);  // a rehash over pooled nodes.
  }
  REQUIRE(pooled.size() == plain.size());
  for (const auto& [key, v] : plain) {
    const auto it = pooled.find(key);
    REQUIRE(it != pooled.end());
    CHECK(it->second.ns == v.ns);
  }
  Pooled moved = std::move(pooled);  // the allocator (the pool) goes with it.
  CHECK(moved.size() == plain.size());
}

}  // namespace
}  // namespace liveprof
