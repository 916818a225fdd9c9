// The sealed chunks' memory (chunk_arena.h): buffers that do not overlap
// and keep what was written; freed oldest first, as the store's memory
// budget frees them, the blocks mapped stay what the live bytes need; a
// block is used again only when every buffer in it has gone.
#include "store/chunk_arena.h"

#include <doctest/doctest.h>

#include <cstring>
#include <deque>
#include <random>
#include <vector>

namespace liveprof {
namespace {

// A buffer written whole with its tag's byte; read back at its first,
// middle and last byte (an overlap with a neighbour shows at one of them).
void Fill(char* p, size_t n, uint32_t tag) { std::memset(p, static_cast<int>(tag * 31 % 251), n); }
bool Holds(const char* p, size_t n, uint32_t tag) {
  const char b = static_cast<char>(tag * 31 % 251);
  return p[0] == b && p[n / 2] == b && p[n - 1] == b;
}

TEST_CASE("chunk arena: buffers keep what was written, none overlaps another") {
  ChunkArena arena;
  std::mt19937 rng(7);
  std::vector<std::pair<ChunkArena::Buffer, size_t>> buffers;
  for (uint32_t i = 0; i < 5000; ++i) {  // ~10 MiB: several blocks.
    const size_t n = 1 + rng() % 4000;
    buffers.emplace_back(arena.Allocate(n), n);
    CHECK(reinterpret_cast<uintptr_t>(buffers.back().first.get()) % 8 == 0);
    Fill(buffers.back().first.get(), n, i);
  }
  for (uint32_t i = 0; i < buffers.size(); ++i) CHECK(Holds(buffers[i].first.get(), buffers[i].second, i));
  buffers.clear();
#if !defined(LIVEPROF_SANITIZED_ADDRESS)  // (there, each buffer is its own allocation)
  CHECK(arena.buffers_live() == 0);
  CHECK(arena.blocks_mapped() <= 1 + ChunkArena::kSpareBlocks);
#endif
}

TEST_CASE("chunk arena: freed oldest first under a byte budget, the blocks mapped stay bounded") {
  ChunkArena arena;
  std::mt19937 rng(11);
  constexpr size_t kBudget = size_t{16} << 20;
  std::deque<std::pair<ChunkArena::Buffer, uint32_t>> live;
  std::vector<size_t> sizes;
  size_t live_bytes = 0, most_blocks = 0;
  for (uint32_t i = 0; i < 150'000; ++i) {  // ~170 MB through a 16 MiB budget.
    // The sizes drift, as a workload's phases change its chunks.
    const size_t n = 60 + rng() % (i < 75'000 ? 400 : 3500);
    live.emplace_back(arena.Allocate(n), i);
    sizes.push_back(n);
    Fill(live.back().first.get(), n, i);
    live_bytes += ChunkArena::Rounded(n);
    while (live_bytes > kBudget) {
      const uint32_t oldest = live.front().second;
      CHECK(Holds(live.front().first.get(), sizes[oldest], oldest));
      live_bytes -= ChunkArena::Rounded(sizes[oldest]);
      live.pop_front();
    }
    most_blocks = std::max(most_blocks, arena.blocks_mapped());
  }
#if !defined(LIVEPROF_SANITIZED_ADDRESS)
  CHECK(arena.buffers_live() == live.size());
  // The budget's blocks, one being filled, one partly freed, the spares.
  CHECK(most_blocks <= kBudget / ChunkArena::kBlockBytes + 2 + ChunkArena::kSpareBlocks);
#endif
  (void)most_blocks;
}

TEST_CASE("chunk arena: a block is used again only when its last buffer has gone") {
  ChunkArena arena;
  // Two blocks' worth of 64 KiB buffers (31 fit in a block after its header).
  std::vector<ChunkArena::Buffer> first_block, second_block;
  for (int i = 0; i < 31; ++i) first_block.push_back(arena.Allocate(ChunkArena::kMaxBytes));
  for (int i = 0; i < 31; ++i) second_block.push_back(arena.Allocate(ChunkArena::kMaxBytes));
  // All of the first block but its last buffer go: nothing of it is reused.
  first_block.resize(30);
  first_block.erase(first_block.begin(), first_block.begin() + 29);
  REQUIRE(first_block.size() == 1);
  ChunkArena::Buffer third = arena.Allocate(ChunkArena::kMaxBytes);  // a third block.
#if !defined(LIVEPROF_SANITIZED_ADDRESS)
  CHECK(arena.blocks_mapped() == 3);
  const uintptr_t kept_block = reinterpret_cast<uintptr_t>(first_block[0].get()) & ~uintptr_t{ChunkArena::kBlockBytes - 1};
  CHECK((reinterpret_cast<uintptr_t>(third.get()) & ~uintptr_t{ChunkArena::kBlockBytes - 1}) != kept_block);
#endif
  first_block.clear();  // now the first block is a spare.
  second_block.clear();
#if !defined(LIVEPROF_SANITIZED_ADDRESS)
  CHECK(arena.buffers_live() == 1);
  CHECK(arena.blocks_mapped() == 3);  // two spares and the current one.
#endif
}

}  // namespace
}  // namespace liveprof
