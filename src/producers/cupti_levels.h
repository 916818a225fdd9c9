// Capture levels of the CUPTI producer (CuptiLevel, cupti_source.h): which
// activity kinds CuptiSource enables, and which CUDA API calls become
// records. Internal to the CUPTI producer (it includes CUPTI's headers).
//
//   kDefault  the cheapest set that still gives the step breakdown, kernel
//             stats, the kernel -> launch -> op joins and the memory profile:
//             CONCURRENT_KERNEL, MEMCPY, MEMCPY2 (peer copies only), MEMSET,
//             MEMORY2, MEMORY_POOL, RUNTIME and DRIVER restricted to the
//             calls DefaultLevelApi() keeps, EXTERNAL_CORRELATION, MARKER
//             (records only with NVTX injection, an explicit request),
//             OVERHEAD (a few records; CUPTI's own cost, shown per step). No
//             SYNCHRONIZATION (the sync call's API record is the span the
//             breakdown reads).
//   kFull     every kind liveprof knows, every API call: the above, all of
//             RUNTIME and DRIVER, and SYNCHRONIZATION.
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
#include <functional>
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
CuptiLevel ChooseCuptiLevel(const std::optional<CuptiLevel>& option, const char* env, std::string* note);

// What `level` records, for CuptiSource::message(): " Level default: API
// calls recorded: runtime 18 of 480, driver 40 of 790 (...)."; `filtered`:
// the filter could be applied (else every call is recorded, and said).
std::string CuptiLevelMessage(CuptiLevel level, bool filtered, const CuptiApiFilter& filter);

// The activity kinds a running CuptiSource has on in CUPTI, turned at run
// time by capture on demand (gpu_activity.h): its activity off and on, and
// its level. Every kind of the full level has an entry (CONCURRENT_KERNEL
// first, then CuptiLevelKinds(kFull) in order); one is on when the level has
// it and the activity is on (MEMORY2 and MEMORY_POOL stay on while it is
// off: the memory profile must see the free of every allocation it saw).
// Kinds are turned off in enabling order and on in its reverse (kernels
// last, once their launches and ops are recorded again). At kDefault the
// API filter is applied after every enable of RUNTIME / DRIVER (which resets
// CUPTI's per-call choices); switching to kFull while they stay on records
// every call again (cuptiActivityEnableRuntimeApi / DriverApi (cbid, 1) for
// each id the filter had switched off), back to kDefault switches them off
// again. A kind CUPTI refused at Start() is not tried again; one refused at a
// switch stays off and is tried at the next.
//
// Not thread-safe: the owner's thread until Start() returns, then under
// CuptiSource's CUPTI lock (capture on demand, Yield(), Regain(), the flush
// thread).
class CuptiKindSet {
 public:
  // The CUPTI entry points it calls. The per-call ones may be null (CUPTI
  // before 12.5): every call is then recorded at every level.
  struct Api {
    decltype(&cuptiActivityEnable) enable = nullptr;
    decltype(&cuptiActivityDisable) disable = nullptr;
    decltype(&cuptiActivityEnableRuntimeApi) enable_runtime_api = nullptr;
    decltype(&cuptiActivityEnableDriverApi) enable_driver_api = nullptr;
  };
  // `driver_api`, `nvtx`: CuptiSource::Options. `name_fn` (may be null)
  // names callback ids for the default level's filter.
  CuptiKindSet(const Api& api, bool driver_api, bool nvtx, CuptiCallbackNameFn name_fn);

  // Enables CONCURRENT_KERNEL alone: its result (Start() fails without it).
  CUptiResult EnableKernels();
  // Then `level`'s other kinds (activity on); returns those CUPTI refused,
  // "SYNCHRONIZATION (<result_name(r)>), ..." ("" when none).
  std::string EnableLevel(CuptiLevel level, const std::function<std::string(CUptiResult)>& result_name);
  // Turns every kind but the memory ones off, or on again.
  void SetActivity(bool on);
  // Switches the level (kinds and API calls, as above).
  void SetLevel(CuptiLevel level);
  // Disables every kind that is on (Stop(), or a Start() that failed late).
  void DisableAll();
  // Another CUPTI client traces (CuptiSource::Yield): every kind off, and
  // kept off; the activity and level switches are still taken, for
  // Resume(). `cupti_knows`: false when CUPTI already forgot the kinds
  // (cuptiFinalize): nothing is called, the entries are only marked off.
  void Suspend(bool cupti_knows);
  // The kinds again, as the activity and the level say, each enabled anew
  // (with the API filter). CONCURRENT_KERNEL's result when it is wanted and
  // CUPTI refused it (it stays off: Resume() may be called again), else
  // CUPTI_SUCCESS.
  CUptiResult Resume();
  bool suspended() const { return suspended_; }

  CuptiLevel level() const { return level_; }
  // The default level's API filter can be applied (this CUPTI names and
  // switches single calls), and what it switches off.
  bool filtered() const { return filter_usable_; }
  const CuptiApiFilter& filter() const { return filter_; }

 private:
  struct Entry {
    CUpti_ActivityKind kind;
    const char* name;
    bool full_only;                    // not in the default level.
    bool on = false;                   // in CUPTI now.
    bool refused = false;              // at Start(): never tried again.
    bool filtered = false;             // RUNTIME / DRIVER: the filter's ids are off now.
    CUptiResult last = CUPTI_SUCCESS;  // its last enable's result.
  };

  bool Wanted(const Entry& e) const;
  CUptiResult Enable(Entry& e);
  // Makes CUPTI's per-call choices of an enabled RUNTIME / DRIVER `e` what
  // the level wants.
  void ApplyFilter(Entry& e);
  // Turns each kind to what Wanted() says: off first, then on in reverse.
  void Reconcile();

  Api api_;
  std::vector<Entry> entries_;
  bool filter_usable_ = false;
  CuptiApiFilter filter_;
  CuptiLevel level_ = CuptiLevel::kDefault;
  bool active_ = true;
  bool suspended_ = false;
};

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_CUPTI_LEVELS_H_
