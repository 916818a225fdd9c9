// The process's one GPU tracer (gpu.h).
#include "attach/gpu.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "producers/cupti_source.h"
#include "producers/gpu_activity.h"
#include "producers/host_api.h"

namespace liveprof::attach {
namespace {

std::mutex g_mu;
std::unique_ptr<CuptiSource> g_source;  // guarded by g_mu; never freed (see GpuStop).
GpuState g_state;                       // guarded by g_mu.
pid_t g_owner = 0;                      // the process that started it (a fork's child did not).
std::string g_other_client;             // guarded by g_mu: a GpuYield() not yet regained ("": none).

// fork(2): g_mu is held across it (a GpuStart in another thread finishes
// first), and a child has no GPU tracer: CUDA does not work in a fork of a
// process that initialised it, and the tracer's threads are the parent's.
// Registered at the first GpuStart, before it takes g_mu and after the
// handlers of what it locks under g_mu (the stream's, the GPU switch's), so
// that the prepare handlers, which run in reverse order, take g_mu first:
// the order GpuStart takes them in.
void PrepareFork() { g_mu.lock(); }
void AfterForkInParent() { g_mu.unlock(); }
void AfterForkInChild() {
  (void)g_source.release();  // (the parent's: never stopped, never freed here)
  g_owner = 0;
  g_other_client.clear();
  g_state = {static_cast<int>(CuptiSource::Status::kUnavailable),
             "a fork of a process that traces its GPU: no GPU tracing in it"};
  g_mu.unlock();
}
void RegisterForkHandlers() {
  static const bool registered = [] {
    GlobalStream();                   // the stream's handlers (host_api.cc),
    EnsureGpuActivityForkHandlers();  // the GPU switch's,
    return pthread_atfork(PrepareFork, AfterForkInParent, AfterForkInChild) == 0;  // then these.
  }();
  (void)registered;
}

}  // namespace

GpuState GpuStart(const std::string& level, bool in_cuinit) {
  RegisterForkHandlers();
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
  o.start_aside_for = g_other_client;  // (another client traces: aside until GpuRegain)
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

int GpuYield(const std::string& client) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_other_client.empty()) return 0;
  if (g_source != nullptr) {
    if (getpid() != g_owner || !g_source->Yield(client.empty() ? "another CUPTI client" : client)) return 0;
    g_other_client = client.empty() ? "another CUPTI client" : client;
    return 1;
  }
  if (g_state.status != 0) return 0;  // (failed, or a fork's child: none will start)
  g_other_client = client.empty() ? "another CUPTI client" : client;
  return 2;
}

int GpuRegain(std::string* message) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_other_client.clear();
  if (g_source == nullptr || getpid() != g_owner || !g_source->aside()) return 2;
  std::string why;
  if (g_source->Regain(&why)) return 1;
  if (message != nullptr) *message = why;
  return 0;
}

int GpuTracerState() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_source == nullptr || getpid() != g_owner) return g_state.status == 0 && !g_other_client.empty() ? 3 : 0;
  if (g_source->status() != CuptiSource::Status::kRunning) return 0;
  return g_source->aside() ? 2 : 1;
}

}  // namespace liveprof::attach
