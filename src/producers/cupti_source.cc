#include "producers/cupti_source.h"

#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>
#include <cupti_version.h>
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "producers/cupti_levels.h"
#include "producers/cupti_records.h"
#include "producers/cupti_source_recorder.h"
#include "producers/gpu_activity.h"
#include "stream/clock.h"

namespace liveprof {
namespace {

constexpr const char* kHostOnly = "GPU activity is off; the run goes on host-only";

// The CUPTI entry points we use, typed from the real declarations.
struct CuptiApi {
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  // Optional: missing ones are done without.
  decltype(&cuptiGetVersion) version = nullptr;
  decltype(&cuptiActivitySetAttribute) set_attribute = nullptr;
  decltype(&cuptiSetThreadIdType) set_thread_id_type = nullptr;
  decltype(&cuptiGetCallbackName) callback_name = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_external = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_external = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;  // for a recording's names.
  decltype(&cuptiActivityEnableRuntimeApi) enable_runtime_api = nullptr;  // CUPTI 12.5+.
  decltype(&cuptiActivityEnableDriverApi) enable_driver_api = nullptr;

  std::string ResultName(CUptiResult r) const {
    const char* s = nullptr;
    if (result_string != nullptr && result_string(r, &s) == CUPTI_SUCCESS && s != nullptr) {
      return std::string(s) + " (" + std::to_string(static_cast<int>(r)) + ")";
    }
    return "CUPTI result " + std::to_string(static_cast<int>(r));
  }
};

template <typename Fn>
bool Symbol(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return *fn != nullptr;
}

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

// Loads libcupti and its required entry points; on failure returns false and
// says why in *error. The library stays loaded for the process's lifetime.
bool LoadCupti(const std::string& library, CuptiApi* api, std::string* error) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    *error = DlError();
    return false;
  }
  const char* missing = nullptr;
  if (!Symbol(lib, "cuptiGetResultString", &api->result_string)) missing = "cuptiGetResultString";
  if (!Symbol(lib, "cuptiActivityRegisterCallbacks", &api->register_callbacks)) {
    missing = "cuptiActivityRegisterCallbacks";
  }
  if (!Symbol(lib, "cuptiActivityEnable", &api->enable)) missing = "cuptiActivityEnable";
  if (!Symbol(lib, "cuptiActivityDisable", &api->disable)) missing = "cuptiActivityDisable";
  if (!Symbol(lib, "cuptiActivityFlushAll", &api->flush_all)) missing = "cuptiActivityFlushAll";
  if (!Symbol(lib, "cuptiActivityGetNumDroppedRecords", &api->dropped)) {
    missing = "cuptiActivityGetNumDroppedRecords";
  }
  if (!Symbol(lib, "cuptiGetTimestamp", &api->timestamp)) missing = "cuptiGetTimestamp";
  if (missing != nullptr) {
    *error = library + " has no " + missing;
    return false;
  }
  Symbol(lib, "cuptiGetVersion", &api->version);
  Symbol(lib, "cuptiActivitySetAttribute", &api->set_attribute);
  Symbol(lib, "cuptiSetThreadIdType", &api->set_thread_id_type);
  Symbol(lib, "cuptiGetCallbackName", &api->callback_name);
  Symbol(lib, "cuptiActivityPushExternalCorrelationId", &api->push_external);
  Symbol(lib, "cuptiActivityPopExternalCorrelationId", &api->pop_external);
  Symbol(lib, "cuptiActivityGetNextRecord", &api->next_record);
  Symbol(lib, "cuptiActivityEnableRuntimeApi", &api->enable_runtime_api);
  Symbol(lib, "cuptiActivityEnableDriverApi", &api->enable_driver_api);
  return true;
}

// Asks the driver (dlopen'ed, never linked) for its GPUs. Returns what it
// found, for messages.
std::string ProbeDriver(const std::string& library, std::vector<CudaDevice>* devices) {
  devices->clear();
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return "no CUDA driver: " + DlError();
  decltype(&cuInit) init = nullptr;
  decltype(&cuDeviceGetCount) get_count = nullptr;
  decltype(&cuDeviceGet) get_device = nullptr;
  decltype(&cuDeviceGetName) get_name = nullptr;
  decltype(&cuDeviceGetAttribute) get_attribute = nullptr;
  decltype(&cuDeviceTotalMem) total_mem = nullptr;  // cuDeviceTotalMem_v2.
  decltype(&cuGetErrorName) error_name = nullptr;
  if (!Symbol(lib, "cuInit", &init) || !Symbol(lib, "cuDeviceGetCount", &get_count) ||
      !Symbol(lib, "cuDeviceGet", &get_device) || !Symbol(lib, "cuDeviceGetName", &get_name) ||
      !Symbol(lib, "cuDeviceGetAttribute", &get_attribute) ||
      !Symbol(lib, "cuDeviceTotalMem_v2", &total_mem)) {
    return library + " lacks a device query entry point (driver too old?)";
  }
  Symbol(lib, "cuGetErrorName", &error_name);
  auto name_of = [&](CUresult r) {
    const char* s = nullptr;
    if (error_name != nullptr && error_name(r, &s) == CUDA_SUCCESS && s != nullptr) {
      return std::string(s);
    }
    return "CUresult " + std::to_string(static_cast<int>(r));
  };
  if (const CUresult r = init(0); r != CUDA_SUCCESS) return "cuInit failed: " + name_of(r);
  int count = 0;
  if (const CUresult r = get_count(&count); r != CUDA_SUCCESS) {
    return "cuDeviceGetCount failed: " + name_of(r);
  }
  if (count == 0) return "CUDA driver loaded, no GPU";
  std::string found = std::to_string(count) + (count == 1 ? " GPU:" : " GPUs:");
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    if (get_device(&dev, i) != CUDA_SUCCESS) continue;
    CudaDevice d;
    d.ordinal = i;
    char name[256] = {};
    if (get_name(name, sizeof name, dev) == CUDA_SUCCESS) d.name = name;
    int v = 0;
    if (get_attribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS) {
      d.sm_count = static_cast<uint32_t>(v);
    }
    if (get_attribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS) {
      d.cc_major = v;
    }
    if (get_attribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == CUDA_SUCCESS) {
      d.cc_minor = v;
    }
    size_t bytes = 0;
    if (total_mem(&bytes, dev) == CUDA_SUCCESS) d.memory_bytes = bytes;
    found += " " + std::to_string(i) + "=" + d.name + " (sm_" + std::to_string(d.cc_major) +
             std::to_string(d.cc_minor) + ", " + std::to_string(d.sm_count) + " SMs, " +
             std::to_string(d.memory_bytes >> 20) + " MiB)";
    devices->push_back(std::move(d));
  }
  return found;
}

// The GPUs as kDeviceInfo events on `ring` (its producer's thread).
void PublishDevices(SpscRing& ring, Stream& stream, const std::vector<CudaDevice>& devices) {
  const uint64_t now = HostNowNs();
  for (const CudaDevice& d : devices) {
    Event* e = ring.TryReserve();
    if (e == nullptr) break;
    *e = Event{};
    e->ts = now;
    e->kind = EventKind::kDeviceInfo;
    e->name = stream.names().Intern(d.name);
    e->device = static_cast<uint8_t>(std::min(d.ordinal, 255));
    e->payload.device_info.memory_bytes = d.memory_bytes;
    e->payload.device_info.sm_count = d.sm_count;
    e->payload.device_info.cc_major = static_cast<uint8_t>(d.cc_major);
    e->payload.device_info.cc_minor = static_cast<uint8_t>(d.cc_minor);
    ring.Publish();
  }
}

// ---------------------------------------------------------------------------
// The buffer pool and CUPTI's callbacks (C function pointers: no user data,
// so the running pool is a global).

enum BufferState : uint8_t { kFree = 0, kWithCupti = 1, kCompleted = 2 };

// The source's counts; owned by the source, updated by the callbacks (only
// while its pool is the running one).
struct SourceCounters {
  std::atomic<uint64_t> dropped{0};  // CUPTI's dropped records.
  std::atomic<uint64_t> refused{0};  // buffer requests the pool could not serve.
};

struct BufferPool {
  struct Slot {
    uint8_t* data = nullptr;
    std::atomic<uint8_t> state{kFree};
    // When CUPTI asked for it (host ns; written as it is handed out): every
    // record CUPTI puts in it is written after that.
    std::atomic<uint64_t> requested_ns{0};
    size_t valid = 0;   // written before state becomes kCompleted (release).
    uint64_t seq = 0;   // completion order.
  };
  std::array<Slot, CuptiSource::kBufferCount> slots;
  std::atomic<uint64_t> next_seq{0};
  SourceCounters* counters = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) get_dropped = nullptr;
  Diagnostics* diag = nullptr;
  CuptiSourceRecorder* recorder = nullptr;  // set before the pool runs; null: no recording.

  bool Allocate() {
    for (Slot& s : slots) {
      s.data = static_cast<uint8_t*>(
          std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, CuptiSource::kBufferBytes));
      if (s.data == nullptr) return false;
    }
    return true;
  }
  ~BufferPool() {
    for (Slot& s : slots) std::free(s.data);
  }
  bool AllFree() const {
    return std::all_of(slots.begin(), slots.end(),
                       [](const Slot& s) {
                         return s.state.load(std::memory_order_acquire) == kFree;
                       });
  }
  // The ring's drop count includes CUPTI's: the source's drops are shown with
  // every other producer's (set once the ring exists).
  std::atomic<SpscRing*> ring{nullptr};

  void AddDropped(size_t n) {
    if (n == 0) return;
    counters->dropped.fetch_add(n, std::memory_order_relaxed);
    diag->Add(Diag::cupti_dropped_records, n);
    if (SpscRing* r = ring.load(std::memory_order_acquire)) r->AddSourceDropped(n);
  }
};

std::atomic<BufferPool*> g_pool{nullptr};
std::atomic<int> g_in_callback{0};
std::atomic<bool> g_source_running{false};

void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  g_in_callback.fetch_add(1);
  if (BufferPool* pool = g_pool.load()) {
    const uint64_t now = HostNowNs();
    for (BufferPool::Slot& s : pool->slots) {
      uint8_t expected = kFree;
      if (s.state.compare_exchange_strong(expected, kWithCupti, std::memory_order_acq_rel)) {
        // (Until this store, a flush thread that sees the slot held reads
        // its previous request's time: earlier, so a progress too cautious,
        // never too far.)
        s.requested_ns.store(now, std::memory_order_relaxed);
        *buffer = s.data;
        *size = CuptiSource::kBufferBytes;
        break;
      }
    }
    // None free: CUPTI drops records, and counts them.
    if (*buffer == nullptr) pool->counters->refused.fetch_add(1, std::memory_order_relaxed);
  }
  g_in_callback.fetch_sub(1);
}

void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                                size_t valid) {
  g_in_callback.fetch_add(1);
  if (BufferPool* pool = g_pool.load()) {
    // Recorded as CUPTI filled it, before it is parsed and given back.
    if (pool->recorder != nullptr) pool->recorder->AddBuffer(buffer, valid, stream);
    for (BufferPool::Slot& s : pool->slots) {
      if (s.data != buffer) continue;
      s.valid = valid;
      s.seq = pool->next_seq.fetch_add(1, std::memory_order_relaxed);
      s.state.store(kCompleted, std::memory_order_release);
      break;
    }
    size_t dropped = 0;
    if (pool->get_dropped(context, stream, &dropped) == CUPTI_SUCCESS) pool->AddDropped(dropped);
  }
  g_in_callback.fetch_sub(1);
}

}  // namespace

// ---------------------------------------------------------------------------
// Messages.

bool IsCuptiPrivilegeError(int result) {
  return result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ||
         result == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES;
}

std::string CuptiEnableFailureMessage(int result, const std::string& result_name,
                                      const std::string& driver) {
  if (IsCuptiPrivilegeError(result)) {
    return "CUPTI refused activity tracing: " + result_name +
           ". Activity tracing (kernels, copies, API calls) needs no privilege; only GPU "
           "performance counters do (root, or the driver option "
           "NVreg_RestrictProfilingToAdminUsers=0), and liveprof does not use them. Something "
           "restricts this process: a container or a virtualized GPU that forbids profiling. "
           "Driver: " + driver + ". " + kHostOnly;
  }
  return "CUPTI loaded but activity tracing unavailable (no CUDA driver/GPU?): " + result_name +
         ". Driver: " + driver + ". " + kHostOnly;
}

// ---------------------------------------------------------------------------
// The running source.

struct CuptiSource::Impl {
  Stream& stream;
  CuptiApi api;
  std::unique_ptr<BufferPool> pool;
  ClockMap clock;
  std::unique_ptr<CuptiRecordParser> parser;
  std::shared_ptr<Ring> ring;
  // The kinds on in CUPTI, turned by capture on demand (gpu_activity.h):
  // under the switch's lock; by the flush thread only once Stop() has
  // removed the switch.
  std::unique_ptr<CuptiKindSet> kinds;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;  // guarded by mu.
  std::string probe_driver;  // the driver library to ask at the first wake ("": asked at Start).
  SourceCounters counters;
  std::unique_ptr<CuptiSourceRecorder> recorder;  // null: no recording.

  explicit Impl(Stream& s) : stream(s) {}

  void AddClockPair() {
    // The tightest of three brackets of host time around CUPTI's timestamp.
    uint64_t best_width = ~uint64_t{0};
    for (int i = 0; i < 3; ++i) {
      uint64_t cupti = 0;
      const uint64_t h0 = HostNowNs();
      if (api.timestamp(&cupti) != CUPTI_SUCCESS) return;
      const uint64_t h1 = HostNowNs();
      if (h1 - h0 < best_width) {
        best_width = h1 - h0;
        if (i == 2 || best_width < 1000) {
          clock.AddPair(cupti, h0 + (h1 - h0) / 2);
          if (recorder) recorder->AddClockPair(cupti, h0 + (h1 - h0) / 2);
          return;
        }
      }
    }
  }

  // Parses every completed buffer, oldest completion first, and returns it
  // to the pool. The flush thread (or Start/Stop when it is not running).
  void ParseCompleted() {
    std::array<BufferPool::Slot*, kBufferCount> done{};
    size_t n = 0;
    for (BufferPool::Slot& s : pool->slots) {
      if (s.state.load(std::memory_order_acquire) == kCompleted) done[n++] = &s;
    }
    // Insertion sort by completion order (n <= kBufferCount; std::sort on this array
    // trips GCC 12's -Warray-bounds).
    for (size_t i = 1; i < n; ++i) {
      for (size_t j = i; j > 0 && done[j]->seq < done[j - 1]->seq; --j) {
        std::swap(done[j], done[j - 1]);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      WaitForRoom(done[i]->valid / sizeof(CUpti_ActivityAPI) + 1);
      parser->Parse(done[i]->data, done[i]->valid, *ring->queue);
      done[i]->state.store(kFree, std::memory_order_release);
    }
  }

  // Gives the drain loop up to half a second to make room for a buffer's
  // events before parsing it (what still does not fit is dropped and counted).
  void WaitForRoom(size_t events) {
    const SpscRing& q = *ring->queue;
    events = std::min(events, q.capacity());
    for (int i = 0; i < 500 && q.capacity() - q.size() < events; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void Flush(uint32_t flag) {
    AddClockPair();
    const uint64_t flush_ns = HostNowNs();
    api.flush_all(flag);
    size_t dropped = 0;
    if (api.dropped(nullptr, 0, &dropped) == CUPTI_SUCCESS) pool->AddDropped(dropped);
    ParseCompleted();
    DeclareProgress(flush_ns);
  }

  // How far this source's events are delivered, for the reorder buffer
  // (RingProgress::kDeclared), after a flush that began at flush_ns has been
  // parsed. cuptiActivityFlushAll(0) gives back every buffer whose records
  // are all complete; CUPTI writes a kernel's record at its launch and its
  // times when it has run, so a buffer still with CUPTI after the flush may
  // hold a record of anything since it was asked for (while the GPU runs
  // behind the CPU, until the buffer fills). So: the flush's start, or just
  // before the oldest buffer CUPTI still holds was asked for (an API call's
  // record is written as it returns, a moment after its end). Only forward.
  void DeclareProgress(uint64_t flush_ns) {
    uint64_t progress = flush_ns;
    for (const BufferPool::Slot& s : pool->slots) {
      // Held by CUPTI, or completed since ParseCompleted looked (CUPTI's
      // worker completes buffers at any time): not in the ring yet either.
      if (s.state.load(std::memory_order_acquire) == kFree) continue;
      const uint64_t requested = s.requested_ns.load(std::memory_order_relaxed);
      progress = std::min(progress, requested > kRequestSlackNs ? requested - kRequestSlackNs : 0);
    }
    if (progress > ring->declared_ns.load(std::memory_order_relaxed)) ring->DeclareProgress(progress);
  }
  static constexpr uint64_t kRequestSlackNs = 1'000'000;

  void Run() {
    pthread_setname_np(pthread_self(), "liveprof-cupti");
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, kFlushPeriod, [this] { return stop; })) {
      lock.unlock();
      if (!probe_driver.empty()) {  // (Options::probe_driver_at_start false)
        std::vector<CudaDevice> devices;
        ProbeDriver(probe_driver, &devices);
        PublishDevices(*ring->queue, stream, devices);
        probe_driver.clear();
      }
      Flush(0);
      lock.lock();
    }
    lock.unlock();
    kinds->DisableAll();
    Flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    ring->closed.store(true, std::memory_order_release);
  }

  // Detaches the pool from CUPTI's callbacks; frees it unless CUPTI still
  // holds one of its buffers (then it is left allocated on purpose: CUPTI
  // may still write into it).
  void ReleasePool() {
    if (!pool) return;
    g_pool.store(nullptr);
    while (g_in_callback.load() != 0) std::this_thread::yield();
    if (pool->AllFree()) {
      pool.reset();
    } else {
      (void)pool.release();
    }
  }

  // Opens the recording asked for (the option, else LIVEPROF_CUPTI_RECORD);
  // the path, or "" when none. A file that cannot be created is said on
  // stderr and the run goes on unrecorded. Before the callbacks exist.
  std::string OpenRecording(const std::string& option) {
    std::string path = option;
    if (path.empty()) {
      if (const char* env = std::getenv("LIVEPROF_CUPTI_RECORD"); env != nullptr) path = env;
    }
    if (path.empty()) return path;
    uint32_t version = 0;
    if (api.version != nullptr) api.version(&version);
    auto r = std::make_unique<CuptiSourceRecorder>(api.next_record);
    std::string error;
    if (!r->Open(path, version, CuptiRecordParser::kOpExternalKind, &error)) {
      std::fprintf(stderr, "liveprof: no CUPTI recording: %s\n", error.c_str());
      return "";
    }
    recorder = std::move(r);
    pool->recorder = recorder.get();
    return path;
  }

  // Closes the recording, once the pool is released (no callback writes).
  // The recorder itself lives as long as the source (a PushOp racing with
  // Stop() may still add to it: ignored). `keep`: false removes the file
  // (Start failed: nothing was recorded).
  void CloseRecording(bool keep) {
    if (!recorder) return;
    const std::string line = recorder->Close();
    if (keep) {
      std::fprintf(stderr, "%s\n", line.c_str());
    } else {
      std::remove(recorder->path().c_str());
    }
  }
};

CuptiSource::CuptiSource(Stream& stream, Options options)
    : stream_(stream), options_(std::move(options)) {}

CuptiSource::~CuptiSource() { Stop(); }

bool CuptiSource::Start() {
  if (status_ != Status::kIdle) return status_ == Status::kRunning;
  if (g_source_running.exchange(true)) {
    status_ = Status::kBusy;
    message_ = std::string("another CuptiSource is running in this process; ") + kHostOnly;
    return false;
  }
  auto fail = [this](Status s, std::string message) {
    if (impl_) {
      impl_->ReleasePool();
      impl_->CloseRecording(/*keep=*/false);
    }
    impl_.reset();
    record_path_.clear();
    status_ = s;
    message_ = std::move(message);
    g_source_running.store(false);
    return false;
  };

  auto impl = std::make_unique<Impl>(stream_);
  std::string error;
  if (!LoadCupti(options_.cupti_library, &impl->api, &error)) {
    driver_message_ = options_.probe_driver_at_start ? ProbeDriver(options_.cuda_library, &devices_)
                                                     : "not asked (inside cuInit)";
    return fail(Status::kNoLibrary, "CUPTI not available (" + error + "); " + kHostOnly);
  }
  impl_ = std::move(impl);
  Impl& im = *impl_;
  const CuptiApi& api = im.api;

  im.pool = std::make_unique<BufferPool>();
  im.pool->counters = &im.counters;
  im.pool->get_dropped = api.dropped;
  im.pool->diag = &stream_.diagnostics();
  if (!im.pool->Allocate()) {
    return fail(Status::kFailed, "no memory for CUPTI's buffer pool; " + std::string(kHostOnly));
  }
  record_path_ = im.OpenRecording(options_.record_path);
  g_pool.store(im.pool.get());

  // One pool for every thread, and OS thread ids (so API spans join the host
  // API's thread tracks). Both before the callbacks and the first kind.
  if (api.set_attribute != nullptr) {
    uint8_t per_thread = 0;
    size_t size = sizeof per_thread;
    api.set_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &size, &per_thread);
  }
  const bool os_thread_ids =
      api.set_thread_id_type != nullptr &&
      api.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) == CUPTI_SUCCESS;
  if (const CUptiResult r = api.register_callbacks(OnBufferRequested, OnBufferCompleted);
      r != CUPTI_SUCCESS) {
    return fail(Status::kFailed, "cuptiActivityRegisterCallbacks failed: " + api.ResultName(r) +
                                     "; " + kHostOnly);
  }
  im.kinds = std::make_unique<CuptiKindSet>(
      CuptiKindSet::Api{api.enable, api.disable, api.enable_runtime_api, api.enable_driver_api},
      options_.driver_api, options_.nvtx, api.callback_name);
  const uint64_t enabled_ns = HostNowNs();  // nothing CUPTI records ends before this.
  if (const CUptiResult r = im.kinds->EnableKernels(); r != CUPTI_SUCCESS) {
    driver_message_ = options_.probe_driver_at_start ? ProbeDriver(options_.cuda_library, &devices_)
                                                     : "not asked (inside cuInit)";
    return fail(IsCuptiPrivilegeError(r) ? Status::kNoPrivileges : Status::kUnavailable,
                CuptiEnableFailureMessage(r, api.ResultName(r), driver_message_));
  }
  std::string level_note;
  const CuptiLevel level =
      ChooseCuptiLevel(options_.level, std::getenv("LIVEPROF_CUPTI_LEVEL"), &level_note);
  level_.store(level);
  const std::string not_enabled =
      im.kinds->EnableLevel(level, [&api](CUptiResult r) { return api.ResultName(r); });

  std::string ring_error;
  im.ring = stream_.AddRing({.name = "cupti", .domain = TimeDomain::kHostNs,
                             .capacity = options_.ring_capacity, .track = 0,
                             .progress = RingProgress::kDeclared},
                            &ring_error);
  if (im.ring == nullptr) {
    im.kinds->DisableAll();
    api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    return fail(Status::kFailed, ring_error + "; " + kHostOnly);
  }
  im.pool->ring.store(im.ring->queue.get(), std::memory_order_release);

  CuptiRecordParser::Options po;
  po.clock = &im.clock;
  po.os_thread_ids = os_thread_ids;
  po.owns_overhead_data = true;
  if (auto name_fn = api.callback_name; name_fn != nullptr) {
    po.api_name = [name_fn](bool driver, uint32_t cbid) -> const char* {
      const char* name = nullptr;
      const auto domain = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
      return name_fn(domain, cbid, &name) == CUPTI_SUCCESS ? name : nullptr;
    };
  }
  im.parser = std::make_unique<CuptiRecordParser>(stream_, std::move(po));
  im.AddClockPair();

  // The GPUs, for the run environment: written before the flush thread
  // exists, so this thread is still the ring's only producer. Inside cuInit
  // (the injection) the driver is not asked now: the flush thread asks it
  // at its first wake, once cuInit has returned.
  if (options_.probe_driver_at_start) {
    driver_message_ = ProbeDriver(options_.cuda_library, &devices_);
    PublishDevices(*im.ring->queue, stream_, devices_);
  } else {
    driver_message_ = "asked after cuInit";
    im.probe_driver = options_.cuda_library;
  }

  uint32_t version = 0;
  if (api.version != nullptr) api.version(&version);
  message_ = "CUPTI " + std::to_string(version) + " tracing GPU activity (" +
             std::to_string(kBufferCount) + " x " + std::to_string(kBufferBytes >> 20) +
             " MiB buffers, flushed every " + std::to_string(kFlushPeriod.count()) +
             " ms). Driver: " + driver_message_ + ".";
  message_ += CuptiLevelMessage(level, im.kinds->filtered(), im.kinds->filter()) + level_note;
  if (!not_enabled.empty()) message_ += " Not enabled: " + not_enabled + ".";
  if (!os_thread_ids) {
    message_ += " CUPTI thread ids are not OS thread ids: API calls get tracks of their own.";
  }
  if (!record_path_.empty()) {
    message_ += " Recording to " + record_path_ +
                (api.next_record == nullptr ? " (without kernel names: no cuptiActivityGetNextRecord)."
                                            : ".");
  }
  status_ = Status::kRunning;
  // Nothing CUPTI records ends before its kinds were enabled: said at once,
  // so that until the first flush (after the driver's probe) the source is
  // not one that cannot say.
  im.ring->DeclareProgress(enabled_ns);
  im.thread = std::thread([&im] { im.Run(); });
  running_.store(true, std::memory_order_release);
  InstallGpuActivitySwitch({.apply = [&im](bool on) { im.kinds->SetActivity(on); },
                            .set_level =
                                [this, &im](CuptiLevel l) {
                                  im.kinds->SetLevel(l);
                                  level_.store(l, std::memory_order_relaxed);
                                },
                            .level = level});
  return true;
}

void CuptiSource::Stop() {
  if (status_ != Status::kRunning) return;
  RemoveGpuActivitySwitch();  // no capture control reaches it from here on.
  running_.store(false, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
  impl_->ReleasePool();
  impl_->CloseRecording(/*keep=*/true);
  status_ = Status::kStopped;
  g_source_running.store(false);
}

uint64_t CuptiSource::dropped() const {
  return impl_ ? impl_->counters.dropped.load(std::memory_order_relaxed) : 0;
}

uint64_t CuptiSource::refused_buffers() const {
  return impl_ ? impl_->counters.refused.load(std::memory_order_relaxed) : 0;
}

void CuptiSource::PushOp(NameId op) {
  if (running_.load(std::memory_order_acquire) && impl_->api.push_external != nullptr) {
    // A recording keeps each op's name (its ids mean nothing elsewhere).
    if (impl_->recorder) impl_->recorder->AddOp(op, stream_.names().Get(op));
    impl_->api.push_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, op);
  }
}

void CuptiSource::PopOp() {
  if (running_.load(std::memory_order_acquire) && impl_->api.pop_external != nullptr) {
    uint64_t last = 0;
    impl_->api.pop_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &last);
  }
}

}  // namespace liveprof
