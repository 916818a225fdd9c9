#include "store/chunk_arena.h"

#include <sys/mman.h>

#include <cassert>
#include <cstdint>
#include <new>

namespace liveprof {

#if defined(LIVEPROF_SANITIZED_ADDRESS)

// Each buffer its own allocation: ASan's redzones around it.
void ChunkArena::Free::operator()(char* p) const noexcept { delete[] p; }
ChunkArena::~ChunkArena() = default;
ChunkArena::Buffer ChunkArena::Allocate(size_t bytes) {
  ++live_;  // (counts buffers given, not freed: sanitizer builds only)
  return Buffer(new char[bytes]);
}

#else

void ChunkArena::Free::operator()(char* p) const noexcept {
  // Blocks are aligned to their size: the block is the address rounded down.
  Block* b = reinterpret_cast<Block*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{kBlockBytes - 1});
  b->owner->Release(b);
}

ChunkArena::~ChunkArena() {
  assert(live_ == 0 && "a chunk buffer outlived its arena");
  if (current_ != nullptr) Unmap(current_);
  for (Block* b : spare_) Unmap(b);
}

ChunkArena::Buffer ChunkArena::Allocate(size_t bytes) {
  assert(bytes >= 1 && bytes <= kMaxBytes);
  const size_t n = Rounded(bytes);
  if (current_ == nullptr || used_ + n > kBlockBytes) {
    Block* full = current_;
    current_ = nullptr;
    if (full != nullptr && full->live == 0) Recycle(full);  // its buffers all gone already.
    if (spare_.empty()) {
      current_ = NewBlock();
    } else {
      current_ = spare_.back();
      spare_.pop_back();
    }
    used_ = kHeader;
  }
  char* p = reinterpret_cast<char*>(current_) + used_;
  used_ += n;
  ++current_->live;
  ++live_;
  return Buffer(p);
}

void ChunkArena::Release(Block* b) {
  --b->live;
  --live_;
  if (b->live == 0 && b != current_) Recycle(b);
}

void ChunkArena::Recycle(Block* b) {
  if (spare_.size() < kSpareBlocks) {
    spare_.push_back(b);
  } else {
    Unmap(b);
    --mapped_;
  }
}

ChunkArena::Block* ChunkArena::NewBlock() {
  // Twice the size, then the aligned block kept and the rest given back.
  void* m = mmap(nullptr, 2 * kBlockBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (start + kBlockBytes - 1) & ~uintptr_t{kBlockBytes - 1};
  if (aligned > start) munmap(m, aligned - start);
  const uintptr_t end = start + 2 * kBlockBytes;
  if (end > aligned + kBlockBytes) munmap(reinterpret_cast<void*>(aligned + kBlockBytes), end - aligned - kBlockBytes);
  void* block = reinterpret_cast<void*>(aligned);
  madvise(block, kBlockBytes, MADV_HUGEPAGE);  // a hint: where THP is off it changes nothing.
  ++mapped_;
  return new (block) Block{this, 0};
}

void ChunkArena::Unmap(Block* b) { munmap(b, kBlockBytes); }

#endif

}  // namespace liveprof
