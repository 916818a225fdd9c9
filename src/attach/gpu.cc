// The process's one GPU tracer (gpu.h).
#include "attach/gpu.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "producers/cupti_source.h"
#include "producers/host_api.h"

namespace liveprof::attach {
namespace {

std::mutex g_mu;
std::unique_ptr<CuptiSource> g_source;  // guarded by g_mu; never freed (see GpuStop).
GpuState g_state;                       // guarded by g_mu.
pid_t g_owner = 0;                      // the process that started it (a fork's child did not).

}  // namespace

GpuState GpuStart(const std::string& level, bool in_cuinit) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_source != nullptr || g_state.status != 0) return g_state;
  CuptiSource::Options o;
  if (const char* lib = std::getenv("LIVEPROF_CUPTI_LIBRARY"); lib != nullptr && *lib != '\0') {
    o.cupti_library = lib;
  }
  if (!level.empty()) {
    CuptiLevel l;
    if (!ParseCuptiLevel(level, &l)) {
      g_state = {static_cast<int>(CuptiSource::Status::kFailed),
                 "GPU level \"" + level + "\" is not one of default, full; GPU tracing off"};
      return g_state;
    }
    o.level = l;
  }
  o.probe_driver_at_start = !in_cuinit;
  auto source = std::make_unique<CuptiSource>(GlobalStream(), std::move(o));
  source->Start();
  g_state = {static_cast<int>(source->status()), source->message()};
  if (source->status() == CuptiSource::Status::kRunning) {
    g_source = std::move(source);
    g_owner = getpid();
    // At exit: CUPTI's last buffers before the sender's last batch (atexit
    // runs in reverse: the sender registered its handler at connect, earlier).
    static const bool registered = std::atexit([] { GpuStop(); }) == 0;
    (void)registered;
  }
  return g_state;
}

void GpuStop() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_source == nullptr) return;
  if (getpid() != g_owner) return;  // a fork's child: the flush thread is the parent's; nothing to stop.
  g_source->Stop();
  g_state = {static_cast<int>(g_source->status()), g_source->message()};
  // Kept allocated: CUPTI may call back into it until the process ends.
  (void)g_source.release();
}

GpuState GpuStatus() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_state;
}

}  // namespace liveprof::attach
