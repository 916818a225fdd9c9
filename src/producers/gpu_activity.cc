#include "producers/gpu_activity.h"

#include <mutex>
#include <utility>

namespace liveprof {
namespace {

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}
std::function<void(bool)> g_apply;  // guarded by Mu().
bool g_enabled = false;             // guarded by Mu().

}  // namespace

void InstallGpuActivitySwitch(std::function<void(bool on)> apply) {
  std::lock_guard<std::mutex> lock(Mu());
  g_apply = std::move(apply);
  g_enabled = static_cast<bool>(g_apply);
}

void RemoveGpuActivitySwitch() {
  std::lock_guard<std::mutex> lock(Mu());
  g_apply = nullptr;
  g_enabled = false;
}

bool GpuActivityAvailable() {
  std::lock_guard<std::mutex> lock(Mu());
  return static_cast<bool>(g_apply);
}

bool GpuActivityEnabled() {
  std::lock_guard<std::mutex> lock(Mu());
  return g_enabled;
}

bool SetGpuActivityEnabled(bool on) {
  std::lock_guard<std::mutex> lock(Mu());
  if (!g_apply) return false;
  if (on != g_enabled) g_apply(on);
  g_enabled = on;
  return true;
}

}  // namespace liveprof
