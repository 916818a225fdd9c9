// CuptiSource's plumbing (cupti_api.h).
#include "producers/cupti_api.h"

#include <dlfcn.h>

#include <algorithm>
#include <string>
#include <vector>

#include "producers/cupti_source_recorder.h"
#include "stream/clock.h"

namespace liveprof::cupti_internal {
namespace {

template <typename Fn>
bool Symbol(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return *fn != nullptr;
}

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

}  // namespace

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
  Symbol(lib, "cuptiGetThreadIdType", &api->get_thread_id_type);
  Symbol(lib, "cuptiGetCallbackName", &api->callback_name);
  Symbol(lib, "cuptiActivityPushExternalCorrelationId", &api->push_external);
  Symbol(lib, "cuptiActivityPopExternalCorrelationId", &api->pop_external);
  Symbol(lib, "cuptiActivityGetNextRecord", &api->next_record);
  Symbol(lib, "cuptiActivityEnableRuntimeApi", &api->enable_runtime_api);
  Symbol(lib, "cuptiActivityEnableDriverApi", &api->enable_driver_api);
  return true;
}

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
      !Symbol(lib, "cuDeviceGetAttribute", &get_attribute) || !Symbol(lib, "cuDeviceTotalMem_v2", &total_mem)) {
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

std::atomic<BufferPool*> g_pool{nullptr};
std::atomic<int> g_in_callback{0};

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

void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
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

}  // namespace liveprof::cupti_internal
