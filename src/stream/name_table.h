// NameTable: interning of names (op names, kernel names, thread names) into
// dense 32-bit ids, safe from any thread. Strings are stored once, NUL
// terminated, and never move: a string_view from Get() stays valid for the
// table's lifetime.
//
// The stream carries ids; each string crosses it once, as a kNameDef event
// that the drain loop emits (in id order, ahead of any event that uses the id)
// from the table's published count. So a name definition can never be dropped
// by a full ring, and a consumer sees every definition before its first use.
#ifndef LIVEPROF_STREAM_NAME_TABLE_H_
#define LIVEPROF_STREAM_NAME_TABLE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stream/diagnostics.h"
#include "stream/event.h"

namespace liveprof {

class NameTable {
 public:
  static constexpr size_t kMaxNameBytes = 4096;    // longer names are cut and counted.
  static constexpr uint32_t kMaxNames = 1u << 22;  // 4 Mi distinct names.

  // Reserved ids, interned at construction.
  static constexpr NameId kEmptyId = 0;      // ""
  static constexpr NameId kNullId = 1;       // "<null>": a null char* was passed.
  static constexpr NameId kTableFullId = 2;  // "<name table full>"

  // `diag` receives null_name, name_truncated, name_table_full; may be null.
  explicit NameTable(Diagnostics* diag = nullptr);
  ~NameTable();
  NameTable(const NameTable&) = delete;
  NameTable& operator=(const NameTable&) = delete;

  // The id of `name`, interning it on first sight. Any thread. A hit takes one
  // shard mutex (32 shards); a miss also takes the append mutex. Hot paths
  // cache the id (LIVEPROF_SCOPE does, in a function-local static).
  NameId Intern(std::string_view name);
  // Same; a null pointer maps to kNullId and counts `null_name`.
  NameId Intern(const char* name);

  // The string of `id`. Any thread, for any id obtained from this table (or
  // below size()). Out-of-range ids give "".
  std::string_view Get(NameId id) const;

  // Number of ids handed out: ids are dense, 0..size()-1. Acquire: every
  // entry below the returned count is readable.
  uint32_t size() const { return published_.load(std::memory_order_acquire); }

  // Every lock of the table, for fork(2) (Stream::LockForFork).
  void LockForFork();
  void UnlockAfterFork();

 private:
  static constexpr uint32_t kBlockShift = 12;
  static constexpr uint32_t kBlockSize = 1u << kBlockShift;
  static constexpr uint32_t kNumBlocks = kMaxNames / kBlockSize;
  static constexpr size_t kNumShards = 32;
  static constexpr size_t kArenaChunk = 64 * 1024;

  struct Entry {
    const char* data;
    uint32_t size;
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string_view, NameId> ids;
  };

  // Copies `s` into the arena and appends it; append_mu_ must be held.
  NameId AppendLocked(std::string_view s);
  const char* CopyToArenaLocked(std::string_view s);

  Diagnostics* diag_;
  std::array<Shard, kNumShards> shards_;
  std::array<std::atomic<Entry*>, kNumBlocks> blocks_{};
  std::atomic<uint32_t> published_{0};

  std::mutex append_mu_;  // guards next_, the arena and block allocation.
  uint32_t next_ = 0;
  std::vector<std::unique_ptr<char[]>> arena_;  // every string's storage.
  char* chunk_ = nullptr;                       // the chunk small strings go to.
  size_t chunk_used_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_STREAM_NAME_TABLE_H_
