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

}  // namespace liveprof::attach

#endif  // LIVEPROF_ATTACH_GPU_H_
