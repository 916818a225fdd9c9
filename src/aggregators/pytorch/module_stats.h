// ModuleStats: PyTorch's module view, live (what its TensorBoard plugin's
// Module View and traceml show): per nn.Module, its calls, forward time
// (total and self: less its child modules'), backward time, and on CUDA the
// memory its forward keeps. From the spans and counters `liveprof run`'s
// level-3 hooks record (src/python/liveprof/_modules.py, docs/attach.md):
//   kHostSpan "nn.Module: <label>"           one forward;
//   kHostSpan "nn.Module: <label>.backward"  one backward;
//   kCounter  "nn.Module memory: <label>"    bytes its forward kept.
// Any other event is ignored, so a job without them has an empty table.
//
// Self time: a module's forward spans nest on their thread as the modules
// do, and arrive in completion order (children first); each forward claims
// the forwards on its track that it contains, as OpStats does for ops.
// Totals since the start (the table answers "where does my model's time
// go", not a rolling question). At most Options::max_modules rows: the
// spans of more are counted (modules_over_cap) and left out.
//
// Pure: no I/O, no locks, no threads. Pipeline thread only.
#ifndef LIVEPROF_AGGREGATORS_PYTORCH_MODULE_STATS_H_
#define LIVEPROF_AGGREGATORS_PYTORCH_MODULE_STATS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "stream/event.h"

namespace liveprof {

class Catalog;
class JsonWriter;

struct ModuleRow {
  std::string name;  // "<path> (<class>)", as the hooks label it.
  uint64_t calls = 0, forward_ns = 0, forward_self_ns = 0;
  uint64_t backward_calls = 0, backward_ns = 0;
  uint64_t memory_samples = 0;
  double memory_last_bytes = 0, memory_max_bytes = 0;
};

struct ModuleStatsSnapshot {
  std::vector<ModuleRow> rows;  // by forward + backward time, descending; ties by name.
  uint64_t modules_over_cap = 0;
  void WriteJson(JsonWriter& w) const;
};

class ModuleStats {
 public:
  struct Options {
    size_t max_modules = 4096;
  };
  explicit ModuleStats(const Catalog* catalog) : ModuleStats(catalog, Options{}) {}
  ModuleStats(const Catalog* catalog, Options options) : catalog_(catalog), options_(options) {}

  // Events in completion order (late ones may come later: they claim no
  // children). Pipeline thread.
  void Consume(std::span<const Event> events);
  ModuleStatsSnapshot Snapshot() const;

 private:
  // What a name is: not yet looked at, none of ours, one of ours past the
  // cap, or a row's forward, backward or memory.
  enum class Role : uint8_t { kUnknown, kNone, kOverCap, kForward, kBackward, kMemory };
  struct NameRole {
    Role role = Role::kUnknown;
    uint32_t row = 0;
  };
  struct Interval {
    uint64_t begin, end;
  };
  const NameRole& RoleOf(NameId name);
  void AddForward(const Event& e, ModuleRow& row);

  const Catalog* catalog_;
  Options options_;
  std::vector<NameRole> roles_;  // by NameId.
  std::vector<ModuleRow> rows_;
  std::unordered_map<std::string, uint32_t> index_;  // label -> row.
  std::vector<std::vector<Interval>> unclaimed_;     // by TrackId: forwards no parent has claimed yet.
  uint64_t over_cap_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_PYTORCH_MODULE_STATS_H_
