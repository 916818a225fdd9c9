// A stand-in for libcupti.so.13, for testing CuptiSource's running path on a
// machine with no GPU: the entry points CuptiSource requires, with CUPTI's
// own declarations, handing out real CUpti_Activity* records through the
// buffer callbacks as CUPTI does. Test-only; loaded by path with dlopen.
// Its clock is CLOCK_MONOTONIC + kFakeClockOffsetNs. A test steers it with
// the fake_cupti_* functions (dlsym), from any thread (one recursive mutex:
// the completion callback calls back into the fake).
#include <cupti_activity.h>
#include <cupti_result.h>
#include <time.h>

#include <cstring>
#include <mutex>
#include <vector>

namespace {

constexpr uint64_t kFakeClockOffsetNs = 1'000'000'000'000;

std::recursive_mutex g_mu;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
std::vector<std::vector<uint8_t>> g_pending;  // records to deliver at the next flush.
std::vector<uint8_t*> g_held;                 // buffers taken and not yet given back.
uint32_t g_flags_seen = 0;
bool g_enabled[CUPTI_ACTIVITY_KIND_COUNT] = {};  // by kind: as CUPTI, records only of enabled kinds.
size_t g_dropped = 0;

uint64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec) +
         kFakeClockOffsetNs;
}

template <typename T>
void Queue(const T& record) {
  std::vector<uint8_t> bytes(sizeof record);
  std::memcpy(bytes.data(), &record, sizeof record);
  g_pending.push_back(std::move(bytes));
}

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "FAKE_CUPTI_ERROR";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_request = request;
  g_complete = complete;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
  g_enabled[kind] = true;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
  g_enabled[kind] = false;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = Now();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  *dropped = g_dropped;
  g_dropped = 0;
  return CUPTI_SUCCESS;
}

// Delivers the pending records in one buffer; a forced flush also gives back
// every held buffer (empty).
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_flags_seen |= flag | 0x100;  // 0x100: some flush happened.
  if (!g_pending.empty()) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    g_request(&buffer, &size, &max_records);
    if (buffer == nullptr) {
      g_dropped += g_pending.size();
    } else {
      size_t valid = 0;
      for (const auto& r : g_pending) {
        if (valid + r.size() > size) break;
        std::memcpy(buffer + valid, r.data(), r.size());
        valid += r.size();
      }
      g_complete(nullptr, 0, buffer, size, valid);
    }
    g_pending.clear();
  }
  if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0) {
    for (uint8_t* b : g_held) g_complete(nullptr, 0, b, 0, 0);
    g_held.clear();
  }
  return CUPTI_SUCCESS;
}

// --- Test controls. ---------------------------------------------------------

// Queues `n` launches: a runtime API record and its kernel, at the fake
// clock's now, on OS thread `thread`; kernel names come from `name`. Each
// record only if its kind is enabled, as CUPTI records.
void fake_cupti_queue_launches(int n, uint32_t thread, const char* name) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  for (int i = 0; i < n; ++i) {
    const uint64_t t = Now();
    CUpti_ActivityAPI api{};
    api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    api.cbid = 211;  // cudaLaunchKernel_v7000.
    api.start = t;
    api.end = t + 2'000;
    api.threadId = thread;
    api.correlationId = static_cast<uint32_t>(1000 + i);
    if (g_enabled[CUPTI_ACTIVITY_KIND_RUNTIME]) Queue(api);
    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = t + 5'000;
    k.end = t + 15'000;
    k.streamId = 7;
    k.gridX = k.gridY = k.gridZ = 1;
    k.blockX = 128;
    k.blockY = k.blockZ = 1;
    k.correlationId = api.correlationId;
    k.name = name;
    if (g_enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) Queue(k);
  }
}

// Asks for `n` buffers and keeps them (a busy CUPTI); returns how many it got.
int fake_cupti_hold_buffers(int n) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  int got = 0;
  for (int i = 0; i < n; ++i) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    size_t max_records = 0;
    g_request(&buffer, &size, &max_records);
    if (buffer != nullptr) {
      g_held.push_back(buffer);
      ++got;
    }
  }
  return got;
}

void fake_cupti_add_dropped(size_t n) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_dropped += n;
}
uint32_t fake_cupti_flags_seen() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_flags_seen;
}
int fake_cupti_enabled_kinds() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  int n = 0;
  for (bool on : g_enabled) n += on ? 1 : 0;
  return n;
}
int fake_cupti_kind_enabled(int kind) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT && g_enabled[kind] ? 1 : 0;
}

}  // extern "C"
