#include "producers/cupti_levels.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

namespace liveprof {

const char* CuptiLevelName(CuptiLevel level) {
  switch (level) {
    case CuptiLevel::kDefault: return "default";
    case CuptiLevel::kFull: return "full";
  }
  return "?";
}

bool ParseCuptiLevel(std::string_view text, CuptiLevel* level) {
  if (text == "default") {
    *level = CuptiLevel::kDefault;
  } else if (text == "full") {
    *level = CuptiLevel::kFull;
  } else {
    return false;
  }
  return true;
}

std::vector<CuptiKindName> CuptiLevelKinds(CuptiLevel level, bool driver_api, bool nvtx) {
  const bool full = level == CuptiLevel::kFull;
  std::vector<CuptiKindName> kinds = {
      {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},           {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2"},
      {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},           {CUPTI_ACTIVITY_KIND_MEMORY2, "MEMORY2"},
      {CUPTI_ACTIVITY_KIND_MEMORY_POOL, "MEMORY_POOL"},
  };
  if (full) kinds.push_back({CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION"});
  kinds.push_back({CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME"});
  if (driver_api) kinds.push_back({CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER"});
  kinds.push_back({CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION"});
  if (nvtx) kinds.push_back({CUPTI_ACTIVITY_KIND_MARKER, "MARKER"});
  // OVERHEAD at every level (as Kineto's default set): a few records a
  // second at most, and CUPTI's own time in them is what liveprof shows as
  // CUPTI's cost per step (HookTotals).
  kinds.push_back({CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD"});
  return kinds;
}

bool DefaultLevelApi(std::string_view name) {
  static constexpr std::string_view kKept[] = {"Launch",   "Memcpy", "Memset",    "Malloc",
                                               "MemAlloc", "Free",   "HostAlloc", "Synchronize"};
  for (std::string_view part : kKept) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

CuptiApiFilter BuildDefaultApiFilter(CuptiCallbackNameFn name_fn) {
  CuptiApiFilter filter;
  if (name_fn == nullptr) return filter;
  auto scan = [name_fn](CUpti_CallbackDomain domain, uint32_t size, std::vector<uint32_t>* off, uint32_t* kept) {
    for (uint32_t cbid = 1; cbid < size + kCbidScanSlack; ++cbid) {
      const char* name = nullptr;
      if (name_fn(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
      if (DefaultLevelApi(name)) {
        ++*kept;
      } else {
        off->push_back(cbid);
      }
    }
  };
  scan(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, &filter.runtime_off, &filter.runtime_kept);
  scan(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, &filter.driver_off, &filter.driver_kept);
  return filter;
}

CuptiLevel ChooseCuptiLevel(const std::optional<CuptiLevel>& option, const char* env, std::string* note) {
  if (option) return *option;
  CuptiLevel level = CuptiLevel::kDefault;
  if (env != nullptr && *env != '\0' && !ParseCuptiLevel(env, &level)) {
    *note = std::string(" LIVEPROF_CUPTI_LEVEL=") + env + " is not a level (default, full): default used.";
  }
  return level;
}

std::string CuptiLevelMessage(CuptiLevel level, bool filtered, const CuptiApiFilter& filter) {
  const std::string m = std::string(" Level ") + CuptiLevelName(level);
  if (level == CuptiLevel::kFull) return m + ": every kind, every API call.";
  if (!filtered) {
    return m +
           ", but this CUPTI cannot record single API calls (no cuptiGetCallbackName or "
           "cuptiActivityEnableRuntimeApi/DriverApi): every API call is recorded.";
  }
  auto of = [](uint32_t kept, size_t off) { return std::to_string(kept) + " of " + std::to_string(kept + off); };
  return m + ": API calls recorded: runtime " + of(filter.runtime_kept, filter.runtime_off.size()) + ", driver " +
         of(filter.driver_kept, filter.driver_off.size()) +
         " (launch, copy, memset, alloc, free, synchronize; LIVEPROF_CUPTI_LEVEL=full records "
         "every call).";
}

}  // namespace liveprof

namespace liveprof {
namespace {

bool IsApiKind(CUpti_ActivityKind k) { return k == CUPTI_ACTIVITY_KIND_RUNTIME || k == CUPTI_ACTIVITY_KIND_DRIVER; }

// Kept on while the activity is off (CuptiKindSet).
bool StaysOn(CUpti_ActivityKind k) { return k == CUPTI_ACTIVITY_KIND_MEMORY2 || k == CUPTI_ACTIVITY_KIND_MEMORY_POOL; }

}  // namespace

CuptiKindSet::CuptiKindSet(const Api& api, bool driver_api, bool nvtx, CuptiCallbackNameFn name_fn) : api_(api) {
  entries_.push_back({CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", false});
  const std::vector<CuptiKindName> base = CuptiLevelKinds(CuptiLevel::kDefault, driver_api, nvtx);
  for (const CuptiKindName& k : CuptiLevelKinds(CuptiLevel::kFull, driver_api, nvtx)) {
    bool in_default = false;
    for (const CuptiKindName& b : base) in_default = in_default || b.kind == k.kind;
    entries_.push_back({k.kind, k.name, !in_default});
  }
  if (name_fn != nullptr && api_.enable_runtime_api != nullptr && api_.enable_driver_api != nullptr) {
    filter_usable_ = true;
    filter_ = BuildDefaultApiFilter(name_fn);
  }
}

CUptiResult CuptiKindSet::EnableKernels() { return Enable(entries_[0]); }

std::string CuptiKindSet::EnableLevel(CuptiLevel level, const std::function<std::string(CUptiResult)>& result_name) {
  level_ = level;
  std::string refused;
  for (Entry& e : entries_) {
    if (e.on || !Wanted(e)) continue;
    if (const CUptiResult r = Enable(e); r != CUPTI_SUCCESS) {
      e.refused = true;
      refused += std::string(refused.empty() ? "" : ", ") + e.name + " (" + result_name(r) + ")";
    }
  }
  return refused;
}

void CuptiKindSet::SetActivity(bool on) {
  active_ = on;
  Reconcile();
}

void CuptiKindSet::SetLevel(CuptiLevel level) {
  level_ = level;
  Reconcile();
}

void CuptiKindSet::DisableAll() {
  for (Entry& e : entries_) {
    if (e.on) api_.disable(e.kind);
    e.on = false;
  }
}

void CuptiKindSet::Suspend(bool cupti_knows) {
  for (Entry& e : entries_) {
    if (e.on && cupti_knows) api_.disable(e.kind);
    e.on = false;
  }
  suspended_ = true;
}

CUptiResult CuptiKindSet::Resume() {
  suspended_ = false;
  Reconcile();
  const Entry& kernels = entries_[0];
  return Wanted(kernels) && !kernels.on ? kernels.last : CUPTI_SUCCESS;
}

bool CuptiKindSet::Wanted(const Entry& e) const {
  return !suspended_ && !e.refused && (active_ || StaysOn(e.kind)) && (!e.full_only || level_ == CuptiLevel::kFull);
}

CUptiResult CuptiKindSet::Enable(Entry& e) {
  const CUptiResult r = api_.enable(e.kind);
  e.last = r;
  if (r == CUPTI_SUCCESS) {
    e.on = true;
    e.filtered = false;  // CUPTI forgot its per-call choices.
    ApplyFilter(e);
  }
  return r;
}

void CuptiKindSet::ApplyFilter(Entry& e) {
  const bool want = level_ == CuptiLevel::kDefault;
  if (!filter_usable_ || !IsApiKind(e.kind) || e.filtered == want) return;
  const uint8_t record = want ? 0 : 1;
  if (e.kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
    for (uint32_t cbid : filter_.runtime_off) api_.enable_runtime_api(cbid, record);
  } else {
    for (uint32_t cbid : filter_.driver_off) api_.enable_driver_api(cbid, record);
  }
  e.filtered = want;
}

void CuptiKindSet::Reconcile() {
  for (Entry& e : entries_) {
    if (e.on && !Wanted(e) && api_.disable(e.kind) == CUPTI_SUCCESS) e.on = false;
  }
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (!it->on && Wanted(*it)) Enable(*it);  // refused: stays off, tried at the next switch.
  }
  for (Entry& e : entries_) {
    if (e.on) ApplyFilter(e);
  }
}

}  // namespace liveprof
