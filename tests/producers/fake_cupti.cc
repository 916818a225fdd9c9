// A stand-in for libcupti.so.13, for testing CuptiSource's running path on a
// machine with no GPU: the entry points CuptiSource requires, with CUPTI's
// own declarations, handing out real CUpti_Activity* records through the
// buffer callbacks as CUPTI does. Test-only; loaded by path with dlopen.
// Its clock is CLOCK_MONOTONIC + kFakeClockOffsetNs. A test steers it with
// the fake_cupti_* functions (dlsym), from any thread (one recursive mutex:
// the completion callback calls back into the fake).
//
// Per-call API records (cuptiActivityEnableRuntimeApi / DriverApi) behave as
// documented for CUPTI 13 and as a real card showed: with the kind on, a
// call switched off is not recorded; enabling the kind again forgets every
// per-call choice. cuptiGetCallbackName knows a small table of real
// callback ids (kCallbacks), a few of each sort a level keeps or drops.
//
// A second CUPTI client, as CUDA 13.0 / drivers before r610 have it (the
// GPU machines': one subscriber; docs/attach.md, "A script that profiles
// itself"): cuptiSubscribe admits one subscriber and refuses a second with
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; the buffer callbacks and
// the kinds are process-wide (whoever registered last gets every buffer,
// one it did not hand out included); cuptiFinalize forgets everything
// (callbacks, kinds, per-call switches, the subscriber, the thread id type,
// records not yet delivered and the buffers it held, never given back).
// fake_cupti_peer_* is such a client, modelled on Kineto (torch.profiler):
// its own callbacks and buffers, CONCURRENT_KERNEL and RUNTIME, a forced
// flush at its stop, optionally cuptiFinalize (TEARDOWN_CUPTI=1).
// cuptiSetThreadIdType / cuptiGetThreadIdType answer only once a test asked
// for them (fake_cupti_thread_id_types(1)); before, NOT_SUPPORTED, so that
// the other tests keep CUPTI's own thread ids.
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_result.h>
#include <cupti_runtime_cbid.h>
#include <time.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

struct CUpti_Subscriber_st {};  // (CUPTI's opaque handle type: a subscriber's slot here)

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
std::map<uint32_t, uint8_t> g_runtime_api;  // cbid -> last per-call switch, since the kind's enable.
std::map<uint32_t, uint8_t> g_driver_api;
size_t g_api_switches = 0;                                               // per-call switches, in all.
std::vector<uint64_t> g_external[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];  // pushed ids, by kind.
std::vector<std::vector<uint8_t>> g_delivered;  // each non-empty buffer completed, as delivered.
CUpti_Subscriber_st g_subscriber_slot;          // the one subscriber's handle.
bool g_subscribed = false;
bool g_thread_id_types = false;  // cuptiSet/GetThreadIdType answer (a test's choice).
CUpti_ActivityThreadIdType g_thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
int g_finalized = 0;            // cuptiFinalize calls.
int g_flushes = 0;              // cuptiActivityFlushAll calls.
bool g_refuse_kernels = false;  // cuptiActivityEnable(CONCURRENT_KERNEL) fails (a test's choice).

struct Callback {
  bool driver;
  uint32_t cbid;
  const char* name;
};
#define FAKE_RT(fn) \
  { false, CUPTI_RUNTIME_TRACE_CBID_##fn, #fn }
#define FAKE_DRV(fn) \
  { true, CUPTI_DRIVER_TRACE_CBID_##fn, #fn }
constexpr Callback kCallbacks[] = {
    FAKE_RT(cudaGetLastError_v3020),
    FAKE_RT(cudaGetDevice_v3020),
    FAKE_RT(cudaMalloc_v3020),
    FAKE_RT(cudaFree_v3020),
    FAKE_RT(cudaMemcpy_v3020),
    FAKE_RT(cudaMemsetAsync_v3020),
    FAKE_RT(cudaStreamSynchronize_v3020),
    FAKE_RT(cudaEventQuery_v3020),
    FAKE_RT(cudaLaunchKernel_v7000),
    FAKE_RT(cudaStreamIsCapturing_v10000),
    FAKE_RT(cudaMallocAsync_v11020),
    FAKE_RT(cudaFreeAsync_v11020),
    FAKE_DRV(cuCtxSynchronize),
    FAKE_DRV(cuEventQuery),
    FAKE_DRV(cuStreamSynchronize),
    FAKE_DRV(cuMemsetD8Async),
    FAKE_DRV(cuMemAlloc_v2),
    FAKE_DRV(cuMemFree_v2),
    FAKE_DRV(cuMemcpyHtoD_v2),
    FAKE_DRV(cuCtxGetCurrent),
    FAKE_DRV(cuLaunchKernel),
    FAKE_DRV(cuDevicePrimaryCtxGetState),
    FAKE_DRV(cuMemAllocAsync),
    FAKE_DRV(cuKernelGetAttribute),
};
#undef FAKE_RT
#undef FAKE_DRV

// Whether CUPTI records API call `cbid` now.
bool ApiRecorded(bool driver, uint32_t cbid) {
  if (!g_enabled[driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME]) return false;
  const auto& calls = driver ? g_driver_api : g_runtime_api;
  const auto it = calls.find(cbid);
  return it == calls.end() || it->second != 0;
}

size_t RecordSize(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    default: return 0;
  }
}

uint64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec) + kFakeClockOffsetNs;
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
  if (g_refuse_kernels && kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) return CUPTI_ERROR_NOT_READY;
  g_enabled[kind] = true;
  // The kind overrides the per-call switches made before (cupti_activity.h).
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) g_runtime_api.clear();
  if (kind == CUPTI_ACTIVITY_KIND_DRIVER) g_driver_api.clear();
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
  ++g_flushes;
  if (g_request == nullptr || g_complete == nullptr) {  // no client: nowhere to put them.
    g_dropped += g_pending.size();
    g_pending.clear();
    return CUPTI_SUCCESS;
  }
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
      g_delivered.emplace_back(buffer, buffer + valid);
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

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  for (const Callback& c : kCallbacks) {
    if (c.cbid == cbid && c.driver == (domain == CUPTI_CB_DOMAIN_DRIVER_API) &&
        (domain == CUPTI_CB_DOMAIN_DRIVER_API || domain == CUPTI_CB_DOMAIN_RUNTIME_API)) {
      *name = c.name;
      return CUPTI_SUCCESS;
    }
  }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_runtime_api[cbid] = enable;
  ++g_api_switches;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_driver_api[cbid] = enable;
  ++g_api_switches;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  g_external[kind].push_back(id);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* last) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID || kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE ||
      g_external[kind].empty()) {
    return CUPTI_ERROR_QUEUE_EMPTY;
  }
  if (last != nullptr) *last = g_external[kind].back();
  g_external[kind].pop_back();
  return CUPTI_SUCCESS;
}

// CUPTI's walk over a buffer, for the kinds this fake writes.
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  uint8_t* next = buffer;
  if (*record != nullptr) {
    const size_t size = RecordSize((*record)->kind);
    if (size == 0) return CUPTI_ERROR_INVALID_KIND;
    next = reinterpret_cast<uint8_t*>(*record) + size;
  }
  if (next >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

// One subscriber at a time, as CUPTI before r610 (and under Nsight tools).
CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (g_subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_subscribed = true;
  *subscriber = &g_subscriber_slot;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (subscriber != &g_subscriber_slot || !g_subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
  g_subscribed = false;
  return CUPTI_SUCCESS;
}

// Detaches CUPTI: every client's state is gone; the next call starts afresh.
CUptiResult CUPTIAPI cuptiFinalize(void) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_request = nullptr;
  g_complete = nullptr;
  for (bool& on : g_enabled) on = false;
  g_runtime_api.clear();
  g_driver_api.clear();
  g_dropped += g_pending.size();  // (never to be delivered)
  g_pending.clear();
  g_held.clear();  // never given back.
  g_subscribed = false;
  g_thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
  ++g_finalized;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (!g_thread_id_types) return CUPTI_ERROR_NOT_SUPPORTED;
  g_thread_id_type = type;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (!g_thread_id_types) return CUPTI_ERROR_NOT_SUPPORTED;
  *type = g_thread_id_type;
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
    // The op pushed (CUSTOM2), as CUPTI ties it to the call: its record first.
    const auto& ops = g_external[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2];
    if (!ops.empty() && g_enabled[CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION]) {
      CUpti_ActivityExternalCorrelation ext{};
      ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
      ext.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
      ext.externalId = ops.back();
      ext.correlationId = api.correlationId;
      Queue(ext);
    }
    if (ApiRecorded(false, api.cbid)) Queue(api);
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
  if (g_request == nullptr) return 0;
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

// Gives back every held buffer (empty), as CUPTI does once their records
// are complete; returns how many.
int fake_cupti_complete_held() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const int n = static_cast<int>(g_held.size());
  if (g_complete == nullptr) return 0;
  for (uint8_t* b : g_held) g_complete(nullptr, 0, b, 0, 0);
  g_held.clear();
  return n;
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
// Whether API call `cbid` of the driver (1) or runtime (0) is recorded now.
int fake_cupti_api_recorded(int driver, uint32_t cbid) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return ApiRecorded(driver != 0, cbid) ? 1 : 0;
}
// Per-call switches made so far (all domains).
size_t fake_cupti_api_switches() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_api_switches;
}
// Buffers delivered with records so far, and buffer `i`'s bytes (its size in *size).
size_t fake_cupti_delivered_count() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_delivered.size();
}
const uint8_t* fake_cupti_delivered(size_t i, size_t* size) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  *size = g_delivered[i].size();
  return g_delivered[i].data();
}
// Forgets what was delivered and the per-call switches (between tests).
void fake_cupti_reset_log() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_delivered.clear();
  g_api_switches = 0;
}

// cuptiSet/GetThreadIdType answer (1) or say NOT_SUPPORTED (0, the default).
void fake_cupti_thread_id_types(int on) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_thread_id_types = on != 0;
  g_thread_id_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
}
// cuptiFinalize calls so far; whether a subscriber holds CUPTI now.
int fake_cupti_finalized() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_finalized;
}
int fake_cupti_subscribed() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_subscribed ? 1 : 0;
}
// cuptiActivityFlushAll calls so far.
int fake_cupti_flushes() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_flushes;
}
// cuptiActivityEnable(CONCURRENT_KERNEL) fails with CUPTI_ERROR_NOT_READY (1) or works (0).
void fake_cupti_refuse_kernels(int on) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_refuse_kernels = on != 0;
}
// External correlation ids pushed and not popped, of kind CUSTOM2 (liveprof's ops).
size_t fake_cupti_external_depth() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_external[CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2].size();
}

}  // extern "C"

// --- The other client: Kineto as torch.profiler runs it. --------------------
namespace {

struct Peer {
  std::set<uint8_t*> buffers;          // handed to CUPTI, not yet back.
  std::map<std::string, int> kernels;  // kernel records received, by name.
  int api_records = 0;
  int unknown_buffers = 0;  // given one it did not hand out (Kineto logs an error).
  bool subscribed = false;
  CUpti_SubscriberHandle subscriber = nullptr;
};
Peer g_peer;

void CUPTIAPI PeerRequest(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, 1 << 20));
  *size = *buffer != nullptr ? size_t{1} << 20 : 0;
  *max_records = 0;
  if (*buffer != nullptr) g_peer.buffers.insert(*buffer);
}

void CUPTIAPI PeerComplete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (g_peer.buffers.erase(buffer) == 0) {
    ++g_peer.unknown_buffers;
    return;
  }
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      ++g_peer.kernels[reinterpret_cast<const CUpti_ActivityKernel10*>(r)->name];
    } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      ++g_peer.api_records;
    }
  }
  std::free(buffer);
}

void CUPTIAPI PeerCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

}  // namespace

extern "C" {

// Starts the other client as Kineto's prepareTrace does (libkineto_init's
// cuptiSubscribe first when `subscribe`): its callbacks, then its kinds.
// Returns cuptiSubscribe's result (CUPTI_SUCCESS when not asked).
int fake_cupti_peer_start(int subscribe) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_peer.kernels.clear();
  g_peer.api_records = 0;
  g_peer.unknown_buffers = 0;
  CUptiResult r = CUPTI_SUCCESS;
  if (subscribe != 0 && !g_peer.subscribed) {
    r = cuptiSubscribe(&g_peer.subscriber, reinterpret_cast<CUpti_CallbackFunc>(PeerCallback), nullptr);
    g_peer.subscribed = r == CUPTI_SUCCESS;
  }
  cuptiActivityRegisterCallbacks(PeerRequest, PeerComplete);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
  cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0);
  return r;
}

// Stops it as Kineto's stopTrace and processTrace do: its kinds off, a
// forced flush; then, with `finalize` (TEARDOWN_CUPTI=1), its subscriber
// goes and cuptiFinalize detaches CUPTI.
void fake_cupti_peer_stop(int finalize) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (finalize != 0) {
    if (g_peer.subscribed) cuptiUnsubscribe(g_peer.subscriber);
    g_peer.subscribed = false;
    cuptiFinalize();
  }
}

// What it received since its start: kernels named `name`, runtime API
// records, and buffers completed to it that it never handed out.
int fake_cupti_peer_kernels(const char* name) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const auto it = g_peer.kernels.find(name);
  return it == g_peer.kernels.end() ? 0 : it->second;
}
int fake_cupti_peer_api_records() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_peer.api_records;
}
int fake_cupti_peer_unknown_buffers() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_peer.unknown_buffers;
}

}  // extern "C"
