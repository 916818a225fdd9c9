// The process's GPU activity switch, for capture on demand (issue #9,
// docs/ingest.md): a GPU producer (CuptiSource) installs how to turn its
// activity on and off while it runs; a sender's capture control turns it
// through here, without knowing which producer it is. There is at most one
// GPU producer a process (CUPTI is process-wide).
//
// Threads: any. Install/Remove and Set are serialized by one mutex, and Set
// calls the producer's function under it, so a producer that has removed
// its switch is never called again (it may then stop freely). The two
// queries read atomics and never wait for a switch in progress.
#ifndef LIVEPROF_PRODUCERS_GPU_ACTIVITY_H_
#define LIVEPROF_PRODUCERS_GPU_ACTIVITY_H_

#include <functional>

namespace liveprof {

// `apply(on)` turns the producer's activity on or off (it returns once done).
// The producer starts on. Replaces a switch installed before.
void InstallGpuActivitySwitch(std::function<void(bool on)> apply);
// No GPU producer any more (its Stop()).
void RemoveGpuActivitySwitch();

// A GPU producer runs here and can be turned. (Lock-free reads.)
bool GpuActivityAvailable();
// Its activity is on (false when none runs).
bool GpuActivityEnabled();
// Turns it on or off, and says in `was` (if given) whether it was on, read
// under the same lock; false (and nothing done) when none runs.
bool SetGpuActivityEnabled(bool on, bool* was = nullptr);

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_GPU_ACTIVITY_H_
