// ChunkArena: the memory of the trace store's sealed chunks.
//
// The store lets chunks leave RAM in the order it sealed them (the oldest
// first: TraceStore::Retain), so their buffers are carved one after another
// from 2 MiB blocks, and a block is used again once every chunk in it has
// gone. Over a long run this holds the memory the budget says: with one
// malloc per chunk (~170 bytes, millions of them, freed oldest first among
// the pipeline's short-lived allocations) the process grew while the live
// heap stayed flat (bench/RESULTS.md, "Soak"). A block is one mapping,
// aligned to its size, with the kernel asked for huge pages (MADV_HUGEPAGE):
// a 4 KiB page fault costs ~10 us on a VM, and the store takes ~50 MB a
// second at 1 M events/s until it is full.
//
// A chunk's buffer is a unique_ptr whose deleter finds its block from the
// address (blocks are aligned): no more than the pointer per chunk. The
// arena must outlive every buffer it gave; buffers are freed on the thread
// that owns the store's writes (no locks). Under AddressSanitizer each
// buffer is its own allocation instead, so that an overrun is caught.
#ifndef LIVEPROF_STORE_CHUNK_ARENA_H_
#define LIVEPROF_STORE_CHUNK_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace liveprof {

class ChunkArena {
 public:
  static constexpr size_t kBlockBytes = size_t{2} << 20;
  static constexpr size_t kMaxBytes = 64 << 10;  // one buffer at most (a sealed chunk is < 4 KiB).
  static constexpr size_t kSpareBlocks = 2;      // emptied blocks kept for reuse; more are unmapped.

  struct Free {
    void operator()(char* p) const noexcept;
  };
  using Buffer = std::unique_ptr<char[], Free>;

  ChunkArena() = default;
  ~ChunkArena();
  ChunkArena(const ChunkArena&) = delete;
  ChunkArena& operator=(const ChunkArena&) = delete;

  // `bytes` (1 to kMaxBytes) of uninitialised memory, 8-byte aligned. Throws
  // std::bad_alloc when no block can be mapped.
  Buffer Allocate(size_t bytes);
  // What a buffer of `bytes` takes in a block.
  static constexpr size_t Rounded(size_t bytes) { return (bytes + 7) & ~size_t{7}; }

  size_t blocks_mapped() const { return mapped_; }  // in use and spare.
  size_t buffers_live() const { return live_; }

 private:
  struct Block {
    ChunkArena* owner;
    uint32_t live;  // buffers in it not freed yet.
  };
  static constexpr size_t kHeader = 64;  // the Block, and the first buffer's alignment.
  void Release(Block* b);  // a buffer in b freed.
  void Recycle(Block* b);  // b, empty and not current_: spare, or unmapped.
  Block* NewBlock();
  static void Unmap(Block* b);

  Block* current_ = nullptr;  // the block buffers are carved from.
  size_t used_ = 0;           // bytes of current_ given out (header included).
  std::vector<Block*> spare_;
  size_t mapped_ = 0;
  size_t live_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_STORE_CHUNK_ARENA_H_
