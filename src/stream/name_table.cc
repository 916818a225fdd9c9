#include "stream/name_table.h"

#include <cstring>
#include <functional>
#include <new>

namespace liveprof {

NameTable::NameTable(Diagnostics* diag) : diag_(diag) {
  std::lock_guard<std::mutex> lock(append_mu_);
  // Reserved ids; not in the shard maps except "" so that Intern("") == 0.
  AppendLocked("");
  AppendLocked("<null>");
  AppendLocked("<name table full>");
  shards_[std::hash<std::string_view>{}("") % kNumShards].ids.emplace(Get(kEmptyId), kEmptyId);
}

NameTable::~NameTable() {
  for (auto& b : blocks_) delete[] b.load(std::memory_order_relaxed);
}

NameId NameTable::Intern(const char* name) {
  if (name == nullptr) {
    if (diag_) diag_->Add(Diag::null_name);
    return kNullId;
  }
  return Intern(std::string_view(name));
}

NameId NameTable::Intern(std::string_view name) {
  if (name.size() > kMaxNameBytes) {
    if (diag_) diag_->Add(Diag::name_truncated);
    name = name.substr(0, kMaxNameBytes);
  }
  Shard& shard = shards_[std::hash<std::string_view>{}(name) % kNumShards];
  std::lock_guard<std::mutex> shard_lock(shard.mu);
  if (auto it = shard.ids.find(name); it != shard.ids.end()) return it->second;

  std::lock_guard<std::mutex> append_lock(append_mu_);
  if (next_ >= kMaxNames) {
    if (diag_) diag_->Add(Diag::name_table_full);
    return kTableFullId;
  }
  // Out of memory must not reach the profiled program: map and count it.
  try {
    const NameId id = AppendLocked(name);
    shard.ids.emplace(Get(id), id);
    return id;
  } catch (const std::bad_alloc&) {
    if (diag_) diag_->Add(Diag::name_table_full);
    return kTableFullId;
  }
}

std::string_view NameTable::Get(NameId id) const {
  if (id >= kMaxNames) return {};
  const Entry* block = blocks_[id >> kBlockShift].load(std::memory_order_acquire);
  if (block == nullptr) return {};
  const Entry& e = block[id & (kBlockSize - 1)];
  return e.data ? std::string_view(e.data, e.size) : std::string_view();
}

NameId NameTable::AppendLocked(std::string_view s) {
  // Allocate everything first, so that a bad_alloc leaves no half entry.
  const NameId id = next_;
  std::atomic<Entry*>& slot = blocks_[id >> kBlockShift];
  Entry* block = slot.load(std::memory_order_relaxed);
  if (block == nullptr) {
    block = new Entry[kBlockSize]();
    slot.store(block, std::memory_order_release);
  }
  block[id & (kBlockSize - 1)] = Entry{CopyToArenaLocked(s), static_cast<uint32_t>(s.size())};
  ++next_;
  published_.store(next_, std::memory_order_release);
  return id;
}

const char* NameTable::CopyToArenaLocked(std::string_view s) {
  const size_t need = s.size() + 1;
  char* dst;
  if (need > kArenaChunk / 4) {  // big strings get their own allocation.
    arena_.push_back(std::make_unique<char[]>(need));
    dst = arena_.back().get();
  } else {
    if (chunk_ == nullptr || chunk_used_ + need > kArenaChunk) {
      arena_.push_back(std::make_unique<char[]>(kArenaChunk));
      chunk_ = arena_.back().get();
      chunk_used_ = 0;
    }
    dst = chunk_ + chunk_used_;
    chunk_used_ += need;
  }
  std::memcpy(dst, s.data(), s.size());
  dst[s.size()] = '\0';
  return dst;
}

void NameTable::LockForFork() {
  for (Shard& shard : shards_) shard.mu.lock();  // (the order Intern takes them in: a shard, then append)
  append_mu_.lock();
}

void NameTable::UnlockAfterFork() {
  append_mu_.unlock();
  for (Shard& shard : shards_) shard.mu.unlock();
}

}  // namespace liveprof
