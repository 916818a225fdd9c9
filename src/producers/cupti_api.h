// The CUPTI producer's plumbing (internal to src/producers): CUPTI's and the
// driver's entry points, loaded at run time (dlopen; never linked), the
// driver's GPUs, and the pool of activity buffers CUPTI's callbacks hand out
// (C function pointers without user data: the running pool is a global).
// CuptiSource (cupti_source.h) is the one user; see there for the threads.
#ifndef LIVEPROF_PRODUCERS_CUPTI_API_H_
#define LIVEPROF_PRODUCERS_CUPTI_API_H_

#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>
#include <cupti_version.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "producers/cupti_source.h"
#include "stream/diagnostics.h"
#include "stream/stream.h"

namespace liveprof {

class CuptiSourceRecorder;

namespace cupti_internal {

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
  decltype(&cuptiGetThreadIdType) get_thread_id_type = nullptr;  // the finalize check.
  decltype(&cuptiGetCallbackName) callback_name = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_external = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_external = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;            // for a recording's names.
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

// Loads libcupti and its required entry points; on failure returns false and
// says why in *error. The library stays loaded for the process's lifetime.
bool LoadCupti(const std::string& library, CuptiApi* api, std::string* error);

// Asks the driver (dlopen'ed, never linked) for its GPUs. Returns what it
// found, for messages.
std::string ProbeDriver(const std::string& library, std::vector<CudaDevice>* devices);

// The GPUs as kDeviceInfo events on `ring` (its producer's thread).
void PublishDevices(SpscRing& ring, Stream& stream, const std::vector<CudaDevice>& devices);

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
    size_t valid = 0;  // written before state becomes kCompleted (release).
    uint64_t seq = 0;  // completion order.
  };
  std::array<Slot, CuptiSource::kBufferCount> slots;
  std::atomic<uint64_t> next_seq{0};
  SourceCounters* counters = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) get_dropped = nullptr;
  Diagnostics* diag = nullptr;
  CuptiSourceRecorder* recorder = nullptr;  // set before the pool runs; null: no recording.

  bool Allocate() {
    for (Slot& s : slots) {
      s.data = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, CuptiSource::kBufferBytes));
      if (s.data == nullptr) return false;
    }
    return true;
  }
  ~BufferPool() {
    for (Slot& s : slots) std::free(s.data);
  }
  bool AllFree() const {
    return std::all_of(slots.begin(), slots.end(),
                       [](const Slot& s) { return s.state.load(std::memory_order_acquire) == kFree; });
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

// The running pool (null: none) and the callbacks in progress (a pool is
// released once none is).
extern std::atomic<BufferPool*> g_pool;
extern std::atomic<int> g_in_callback;

// CUPTI's buffer callbacks (cuptiActivityRegisterCallbacks): a free slot of
// the running pool, none when it has none (CUPTI drops and counts); a
// completed buffer marked for parsing. CUPTI's threads.
void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid);

}  // namespace cupti_internal
}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_CUPTI_API_H_
