#include "producers/gpu_activity.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <utility>

namespace liveprof {
namespace {

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}
GpuActivitySwitch g_switch;  // guarded by Mu(); no producer while apply is empty.
// Written under Mu(), read without it: a sender asks every round, and must
// not wait while a producer's switch runs (CUPTI calls may take a while).
std::atomic<bool> g_available{false}, g_enabled{false};
std::atomic<CuptiLevel> g_level{CuptiLevel::kDefault};

// Sets `state` to `value` through the producer's `fn` (called only on a
// change), saying the state before in `was`. Under Mu(); false without a
// producer.
template <typename T>
bool Turn(const std::function<void(T)>& fn, std::atomic<T>& state, T value, T* was) {
  if (!fn) return false;
  const T before = state.load();
  if (was != nullptr) *was = before;
  if (value != before) fn(value);
  state.store(value);
  return true;
}

// fork(2): Mu() is held across it (a switch in another thread, a sender's
// capture control, finishes first), and a child has no GPU producer: the
// parent's CuptiSource and its threads are not the child's to switch (CUDA
// does not work in a fork of a process that initialised it). So a forked
// DataLoader worker says gpu_available false, and a capture asking it for
// GPU activity is refused.
void PrepareFork() { Mu().lock(); }
void AfterForkInParent() { Mu().unlock(); }
void AfterForkInChild() {
  g_switch = GpuActivitySwitch{};  // (callables only: dropping them calls nothing)
  g_available.store(false);
  g_enabled.store(false);
  g_level.store(CuptiLevel::kDefault);
  Mu().unlock();
}

}  // namespace

void EnsureGpuActivityForkHandlers() {
  static const bool at_fork = pthread_atfork(PrepareFork, AfterForkInParent, AfterForkInChild) == 0;
  (void)at_fork;
}

void InstallGpuActivitySwitch(GpuActivitySwitch gpu) {
  EnsureGpuActivityForkHandlers();
  std::lock_guard<std::mutex> lock(Mu());
  const bool available = gpu.apply && gpu.set_level;
  g_switch = available ? std::move(gpu) : GpuActivitySwitch{};
  g_available.store(available);
  g_enabled.store(available);
  g_level.store(g_switch.level);
}

void RemoveGpuActivitySwitch() {
  std::lock_guard<std::mutex> lock(Mu());
  g_switch = GpuActivitySwitch{};
  g_available.store(false);
  g_enabled.store(false);
  g_level.store(CuptiLevel::kDefault);
}

bool GpuActivityAvailable() { return g_available.load(); }

bool GpuActivityEnabled() { return g_enabled.load(); }

CuptiLevel GpuActivityLevel() { return g_level.load(); }

bool SetGpuActivityEnabled(bool on, bool* was) {
  std::lock_guard<std::mutex> lock(Mu());
  return Turn(g_switch.apply, g_enabled, on, was);
}

bool SetGpuActivityLevel(CuptiLevel level, CuptiLevel* was) {
  std::lock_guard<std::mutex> lock(Mu());
  return Turn(g_switch.set_level, g_level, level, was);
}

}  // namespace liveprof
