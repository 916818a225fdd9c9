// The process's GPU activity switch, for capture on demand
// (docs/ingest.md): a GPU producer (CuptiSource) installs how to turn its
// activity on and off, and how to change its capture level, while it runs; a
// sender's capture control turns it through here, without knowing which
// producer it is. There is at most one GPU producer a process (CUPTI is
// process-wide).
//
// Threads: any. Install/Remove and the setters are serialized by one mutex,
// and a setter calls the producer's function under it, so a producer that
// has removed its switch is never called again (it may then stop freely).
// The queries read atomics and never wait for a switch in progress.
#ifndef LIVEPROF_PRODUCERS_GPU_ACTIVITY_H_
#define LIVEPROF_PRODUCERS_GPU_ACTIVITY_H_

#include <cstdint>
#include <functional>

namespace liveprof {

// What the GPU producer captures (CuptiSource, cupti_levels.h). Here, not in
// cupti_source.h, so that a build without the CUDA toolkit knows it too.
enum class CuptiLevel : uint8_t {
  kDefault = 0,  // the analyses' needs, at the least cost.
  kFull = 1,     // every kind, every API call.
};

// How a GPU producer is turned; each function returns once done.
struct GpuActivitySwitch {
  std::function<void(bool on)> apply;               // activity on or off.
  std::function<void(CuptiLevel level)> set_level;  // its capture level.
  CuptiLevel level = CuptiLevel::kDefault;          // the level it starts at.
};

// The producer starts on, at `gpu.level`. Replaces a switch installed
// before. `apply` and `set_level` are both required (a switch without them
// is none).
void InstallGpuActivitySwitch(GpuActivitySwitch gpu);
// Registers the switch's fork handlers (InstallGpuActivitySwitch does, at
// its first call): a caller that holds a lock of its own around the switch
// registers them before its own (attach/gpu.cc), so that a fork takes the
// locks in the order the caller does. Idempotent.
void EnsureGpuActivityForkHandlers();
// No GPU producer any more (its Stop()).
void RemoveGpuActivitySwitch();

// A GPU producer runs here and can be turned. (Lock-free reads.)
bool GpuActivityAvailable();
// Its activity is on (false when none runs).
bool GpuActivityEnabled();
// Its capture level (kDefault when none runs). Changed while its activity
// is off, it applies when the activity is on again.
CuptiLevel GpuActivityLevel();
// Turns it on or off, and says in `was` (if given) whether it was on, read
// under the same lock; false (and nothing done) when none runs.
bool SetGpuActivityEnabled(bool on, bool* was = nullptr);
// Switches its capture level, and says in `was` (if given) the level before,
// read under the same lock; false (and nothing done) when none runs.
bool SetGpuActivityLevel(CuptiLevel level, CuptiLevel* was = nullptr);

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_GPU_ACTIVITY_H_
