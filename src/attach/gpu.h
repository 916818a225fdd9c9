// The process's one GPU tracer (a CuptiSource on GlobalStream()), started by
// CUDA's injection entry point (injection.cc) or by liveprof_gpu_start (the
// Python module's connect(gpu=True)), whichever comes first.
#ifndef LIVEPROF_ATTACH_GPU_H_
#define LIVEPROF_ATTACH_GPU_H_

#include <string>

namespace liveprof::attach {

struct GpuState {
  int status = 0;       // CuptiSource::Status as an int (0: never started).
  std::string message;  // what Start() said, or why it was not tried.
};

// Starts it once (later calls return the first one's state). `level`:
// "default", "full", or "" (LIVEPROF_CUPTI_LEVEL, else default); CUPTI from
// LIVEPROF_CUPTI_LIBRARY if set. `in_cuinit`: called from inside cuInit
// (the injection): the driver is not asked for its GPUs until later. The
// source stops at exit (its last flush), before the sender's last send.
// Any thread.
GpuState GpuStart(const std::string& level, bool in_cuinit);
// Stops it after a last flush. Idempotent. Any thread.
void GpuStop();
GpuState GpuStatus();

// Another CUPTI client in the process (torch.profiler's Kineto; docs/attach.md,
// "A script that profiles itself"), named `client`, is about to trace: the
// tracer steps aside (CuptiSource::Yield), or, when none runs yet, one that
// starts before GpuRegain() starts aside (CUDA's injection may start it in
// the other client's first CUPTI call). 1: stepped aside now; 2: noted (no
// tracer yet); 0: nothing to do (aside already, tracing off for good, a
// fork's child). Any thread.
int GpuYield(const std::string& client);
// The other client has stopped: the tracer takes CUPTI back. 1: tracing
// again; 2: nothing to take back (no tracer, or not aside); 0: CUPTI
// refused, why in *message (still aside: call again later). Any thread.
int GpuRegain(std::string* message);
// 0: no tracer (not started, failed, stopped); 1: tracing; 2: aside for
// another client; 3: none yet, but one would start aside (a GpuYield noted).
int GpuTracerState();

}  // namespace liveprof::attach

#endif  // LIVEPROF_ATTACH_GPU_H_
