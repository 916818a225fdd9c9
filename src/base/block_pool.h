// BlockPool and PoolAllocator: node memory for a node-based container
// (std::unordered_map) whose nodes come and go one at a time on a hot path.
// Each node is a block from a free list refilled from 64 KiB chunks: no
// malloc per insert, no free per erase, and the nodes of one map lie
// together. Anything but one object (the bucket array) goes to operator new.
// The pool gives its chunks back only when it is destroyed: it must outlive
// every container that allocates from it.
//
// Not thread-safe; owned by one aggregator on the pipeline thread.
#ifndef LIVEPROF_BASE_BLOCK_POOL_H_
#define LIVEPROF_BASE_BLOCK_POOL_H_

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace liveprof {

class BlockPool {
 public:
  static constexpr size_t kBlockAlign = alignof(std::max_align_t);

  // Blocks of at least `block_bytes`, rounded up to kBlockAlign (so that a
  // free block holds the free list's link).
  explicit BlockPool(size_t block_bytes)
      : block_(block_bytes == 0 ? kBlockAlign : (block_bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign) {}
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  size_t block_bytes() const { return block_; }

  void* Get() {
    if (free_ != nullptr) {
      FreeBlock* b = free_;
      free_ = b->next;
      return b;
    }
    if (next_ == end_) Refill();
    void* p = next_;
    next_ += block_;
    return p;
  }

  void Put(void* p) {
    FreeBlock* b = static_cast<FreeBlock*>(p);
    b->next = free_;
    free_ = b;
  }

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  static constexpr size_t kChunkBytes = size_t{64} << 10;

  void Refill() {
    const size_t n = kChunkBytes / block_ > 0 ? kChunkBytes / block_ : 1;
    chunks_.emplace_back(new (std::align_val_t{kBlockAlign}) std::byte[n * block_]);
    next_ = chunks_.back().get();
    end_ = next_ + n * block_;
  }

  struct ChunkDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{kBlockAlign}); }
  };

  size_t block_;
  FreeBlock* free_ = nullptr;
  std::byte* next_ = nullptr;
  std::byte* end_ = nullptr;
  std::vector<std::unique_ptr<std::byte[], ChunkDelete>> chunks_;
};

// A standard allocator over a BlockPool: one T at a time from the pool when
// it fits a block, anything else from operator new.
template <typename T>
class PoolAllocator {
 public:
  using value_type = T;

  explicit PoolAllocator(BlockPool* pool) noexcept : pool_(pool) {}
  template <typename U>
  PoolAllocator(const PoolAllocator<U>& other) noexcept : pool_(other.pool()) {}

  T* allocate(size_t n) {
    if (Pooled(n)) return static_cast<T*>(pool_->Get());
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (Pooled(n)) {
      pool_->Put(p);
    } else {
      std::allocator<T>().deallocate(p, n);
    }
  }

  BlockPool* pool() const noexcept { return pool_; }
  template <typename U>
  bool operator==(const PoolAllocator<U>& o) const noexcept {
    return pool_ == o.pool();
  }

 private:
  bool Pooled(size_t n) const noexcept {
    return n == 1 && sizeof(T) <= pool_->block_bytes() && alignof(T) <= BlockPool::kBlockAlign;
  }

  BlockPool* pool_;
};

}  // namespace liveprof

#endif  // LIVEPROF_BASE_BLOCK_POOL_H_
