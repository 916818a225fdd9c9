#include "producers/gpu_activity.h"

#include <atomic>
#include <mutex>
#include <utility>

namespace liveprof {
namespace {

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}
std::function<void(bool)> g_apply;  // guarded by Mu().
// Written under Mu(), read without it: a sender asks every round, and must
// not wait while a producer's switch runs (CUPTI calls may take a while).
std::atomic<bool> g_available{false}, g_enabled{false};

}  // namespace

void InstallGpuActivitySwitch(std::function<void(bool on)> apply) {
  std::lock_guard<std::mutex> lock(Mu());
  g_apply = std::move(apply);
  g_available.store(static_cast<bool>(g_apply));
  g_enabled.store(static_cast<bool>(g_apply));
}

void RemoveGpuActivitySwitch() {
  std::lock_guard<std::mutex> lock(Mu());
  g_apply = nullptr;
  g_available.store(false);
  g_enabled.store(false);
}

bool GpuActivityAvailable() { return g_available.load(); }

bool GpuActivityEnabled() { return g_enabled.load(); }

bool SetGpuActivityEnabled(bool on, bool* was) {
  std::lock_guard<std::mutex> lock(Mu());
  if (!g_apply) return false;
  const bool before = g_enabled.load();
  if (was != nullptr) *was = before;
  if (on != before) g_apply(on);
  g_enabled.store(on);
  return true;
}

}  // namespace liveprof
