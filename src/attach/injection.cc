// CUDA's injection entry point (liveprof_c.h): `liveprof run` sets
// CUDA_INJECTION64_PATH to libliveprof.so, and the driver loads it and calls
// InitializeInjection() once, inside the job's first cuInit. From there on
// the job's GPU activity goes to the server, with no change to the job.
//
// Whatever happens here, the job goes on: no exception leaves, nothing
// exits, and each reason liveprof does not trace is said once on stderr.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "attach/gpu.h"
#include "attach/liveprof_c.h"
#include "ingest/global_sender.h"
#include "producers/cupti_source.h"
#include "producers/host_api.h"

extern "C" int InitializeInjection(void) {
  using namespace liveprof;
  static std::atomic<bool> called{false};
  if (called.exchange(true)) return 1;
  try {
    GlobalStream();  // connects to LIVEPROF_SERVER if it is set (a bad one is said on stderr).
    if (!GlobalSenderStatus().running) {
      std::fprintf(stderr,
                   "liveprof: loaded by CUDA (CUDA_INJECTION64_PATH) but not sending: %s; GPU activity is not "
                   "traced\n",
                   std::getenv("LIVEPROF_SERVER") == nullptr ? "LIVEPROF_SERVER is not set"
                                                             : "LIVEPROF_SERVER could not be used");
      return 1;
    }
    const attach::GpuState gpu = attach::GpuStart("", /*in_cuinit=*/true);
    if (gpu.status != static_cast<int>(CuptiSource::Status::kRunning)) {
      std::fprintf(stderr, "liveprof: GPU activity is not traced: %s\n", gpu.message.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "liveprof: GPU activity is not traced: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "liveprof: GPU activity is not traced: an unknown error\n");
  }
  return 1;
}
