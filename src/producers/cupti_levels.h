// Capture levels of the CUPTI producer (CuptiLevel, cupti_source.h): which
// activity kinds CuptiSource enables, and which CUDA API calls become
// records. Internal to the CUPTI producer (it includes CUPTI's headers).
//
//   kDefault  the cheapest set that still gives the step breakdown, kernel
//             stats, the kernel -> launch -> op joins and the memory profile:
//             CONCURRENT_KERNEL, MEMCPY, MEMCPY2 (peer copies only), MEMSET,
//             MEMORY2, MEMORY_POOL, RUNTIME and DRIVER restricted to the
//             calls DefaultLevelApi() keeps, EXTERNAL_CORRELATION, MARKER
//             (records only with NVTX injection, an explicit request). No
//             SYNCHRONIZATION (the sync call's API record is the span the
//             breakdown reads), no OVERHEAD.
//   kFull     every kind liveprof knows, every API call: the above, all of
//             RUNTIME and DRIVER, SYNCHRONIZATION and OVERHEAD.
//
// Restricting API calls (as Kineto does, with the same CUPTI 12.5+ entry
// points): enable the RUNTIME / DRIVER kind, then switch off, with
// cuptiActivityEnableRuntimeApi / cuptiActivityEnableDriverApi (cbid, 0),
// every callback id whose name (cuptiGetCallbackName) is not kept. Enabling
// the kind again forgets those choices (CUPTI's documented override), so the
// source applies the filter again after every enable of the kind. The ids
// scanned are 1 .. this header's CBID_SIZE + kCbidScanSlack (a newer CUPTI
// may know more; those it names are filtered too).
#ifndef LIVEPROF_PRODUCERS_CUPTI_LEVELS_H_
#define LIVEPROF_PRODUCERS_CUPTI_LEVELS_H_

#include <cupti_activity.h>
#include <cupti_callbacks.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "producers/cupti_source.h"

namespace liveprof {

struct CuptiKindName {
  CUpti_ActivityKind kind;
  const char* name;
};

// The kinds a level enables after CONCURRENT_KERNEL (which every level
// enables first, and alone decides whether Start() succeeds), in enabling
// order. `driver_api` and `nvtx`: CuptiSource::Options.
std::vector<CuptiKindName> CuptiLevelKinds(CuptiLevel level, bool driver_api, bool nvtx);

// True if API call `name` (CUPTI's callback name, "cudaLaunchKernel_v7000"
// or stripped) is recorded at kDefault: kernel launches and graph launches
// ("Launch": the steps' launch detection and the kernel -> launch join),
// copies ("Memcpy") and memsets ("Memset", both launches for the steps too),
// allocations and frees ("Malloc", "MemAlloc", "HostAlloc", "Free"), and
// the synchronize calls that the breakdown sees the host wait in
// ("Synchronize"). Not: cudaGetDevice, cuKernelGetAttribute,
// cuDevicePrimaryCtxGetState, cuCtxGetCurrent, event queries, ...
bool DefaultLevelApi(std::string_view name);

// Callback ids scanned past this header's CUPTI_*_TRACE_CBID_SIZE.
inline constexpr uint32_t kCbidScanSlack = 256;

// Which callback ids kDefault switches off, per domain.
struct CuptiApiFilter {
  std::vector<uint32_t> runtime_off;
  std::vector<uint32_t> driver_off;
  uint32_t runtime_kept = 0;  // ids named and kept.
  uint32_t driver_kept = 0;
};

using CuptiCallbackNameFn = decltype(&cuptiGetCallbackName);

// Names every callback id through `name_fn` (ids it does not name are
// skipped) and sorts them by DefaultLevelApi().
CuptiApiFilter BuildDefaultApiFilter(CuptiCallbackNameFn name_fn);

// The level in effect: `option` if set, else `env` (LIVEPROF_CUPTI_LEVEL's
// value; null or empty: unset), else kDefault. A value that is not a level
// is ignored and said in *note (" LIVEPROF_CUPTI_LEVEL=x is not a level
// (default, full): default used.").
CuptiLevel ChooseCuptiLevel(const std::optional<CuptiLevel>& option, const char* env,
                            std::string* note);

// What `level` records, for CuptiSource::message(): " Level default: API
// calls recorded: runtime 18 of 480, driver 40 of 790 (...)."; `filtered`:
// the filter could be applied (else every call is recorded, and said).
std::string CuptiLevelMessage(CuptiLevel level, bool filtered, const CuptiApiFilter& filter);

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_CUPTI_LEVELS_H_
