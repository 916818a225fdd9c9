#include "producers/cupti_names.h"

#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

#include <string>

namespace liveprof {

// The API calls a training job makes most, so that names (and the launch
// detection of steps.h, which looks for "Launch", "Memcpy", "Memset") work
// even without cuptiGetCallbackName.
namespace {

struct BuiltinApi {
  bool driver;
  uint32_t cbid;
  const char* name;
};
#define LIVEPROF_RT(fn, ver) \
  { false, CUPTI_RUNTIME_TRACE_CBID_##fn##_##ver, #fn }
#define LIVEPROF_DRV(fn) \
  { true, CUPTI_DRIVER_TRACE_CBID_##fn, #fn }
constexpr BuiltinApi kBuiltinApis[] = {
    LIVEPROF_RT(cudaLaunchKernel, v7000),
    LIVEPROF_RT(cudaLaunchKernel_ptsz, v7000),
    LIVEPROF_RT(cudaLaunchKernelExC, v11060),
    LIVEPROF_RT(cudaLaunchCooperativeKernel, v9000),
    LIVEPROF_RT(cudaGraphLaunch, v10000),
    LIVEPROF_RT(cudaGraphLaunch_ptsz, v10000),
    LIVEPROF_RT(cudaMemcpy, v3020),
    LIVEPROF_RT(cudaMemcpyAsync, v3020),
    LIVEPROF_RT(cudaMemcpyAsync_ptsz, v7000),
    LIVEPROF_RT(cudaMemcpy2DAsync, v3020),
    LIVEPROF_RT(cudaMemset, v3020),
    LIVEPROF_RT(cudaMemsetAsync, v3020),
    LIVEPROF_RT(cudaMemsetAsync_ptsz, v7000),
    LIVEPROF_RT(cudaMalloc, v3020),
    LIVEPROF_RT(cudaFree, v3020),
    LIVEPROF_RT(cudaMallocAsync, v11020),
    LIVEPROF_RT(cudaFreeAsync, v11020),
    LIVEPROF_RT(cudaMallocHost, v3020),
    LIVEPROF_RT(cudaFreeHost, v3020),
    LIVEPROF_RT(cudaHostAlloc, v3020),
    LIVEPROF_RT(cudaMallocManaged, v6000),
    LIVEPROF_RT(cudaStreamSynchronize, v3020),
    LIVEPROF_RT(cudaStreamSynchronize_ptsz, v7000),
    LIVEPROF_RT(cudaEventSynchronize, v3020),
    LIVEPROF_RT(cudaDeviceSynchronize, v3020),
    LIVEPROF_RT(cudaEventRecord, v3020),
    LIVEPROF_RT(cudaStreamWaitEvent, v3020),
    LIVEPROF_DRV(cuLaunchKernel),
    LIVEPROF_DRV(cuLaunchKernel_ptsz),
    LIVEPROF_DRV(cuLaunchKernelEx),
    LIVEPROF_DRV(cuLaunchKernelEx_ptsz),
    LIVEPROF_DRV(cuLaunchCooperativeKernel),
    LIVEPROF_DRV(cuGraphLaunch),
    LIVEPROF_DRV(cuGraphLaunch_ptsz),
    LIVEPROF_DRV(cuMemcpyHtoD_v2),
    LIVEPROF_DRV(cuMemcpyDtoH_v2),
    LIVEPROF_DRV(cuMemcpyHtoDAsync_v2),
    LIVEPROF_DRV(cuMemcpyDtoHAsync_v2),
    LIVEPROF_DRV(cuMemcpyAsync),
    LIVEPROF_DRV(cuMemcpyAsync_ptsz),
    LIVEPROF_DRV(cuMemsetD8Async),
    LIVEPROF_DRV(cuMemAlloc_v2),
    LIVEPROF_DRV(cuMemFree_v2),
    LIVEPROF_DRV(cuMemAllocAsync),
    LIVEPROF_DRV(cuMemFreeAsync),
    LIVEPROF_DRV(cuMemAllocManaged),
    LIVEPROF_DRV(cuStreamSynchronize),
    LIVEPROF_DRV(cuStreamSynchronize_ptsz),
    LIVEPROF_DRV(cuEventSynchronize),
    LIVEPROF_DRV(cuCtxSynchronize),
};
#undef LIVEPROF_RT
#undef LIVEPROF_DRV

}  // namespace

const char* BuiltinCuptiApiName(bool driver, uint32_t cbid) {
  for (const BuiltinApi& a : kBuiltinApis) {
    if (a.driver == driver && a.cbid == cbid) return a.name;
  }
  return nullptr;
}

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (CUPTI's callback names
// carry the version of the entry point; ours do not).
std::string_view StripCuptiVersion(std::string_view name) {
  const size_t v = name.rfind("_v");
  if (v == std::string_view::npos || v + 2 == name.size()) return name;
  for (size_t i = v + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, v);
}

const char* OverheadName(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "CUPTI overhead: driver compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "CUPTI overhead: buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "CUPTI overhead: instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "CUPTI overhead: resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "CUPTI overhead: module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "CUPTI overhead: lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "CUPTI overhead: command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "CUPTI overhead: buffer request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "CUPTI overhead: UVM init";
    default: return "CUPTI overhead";
  }
}

bool IsCuptiOwnOverhead(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return true;
    default: return false;
  }
}

namespace {
constexpr size_t kMaxDemangledInput = 4096;
}  // namespace

std::string DemangledKernelName(const char* name) {
  if (name == nullptr) return {};
  // Itanium C++ ABI symbols start "_Z"; anything else is a plain name.
  if (name[0] != '_' || name[1] != 'Z') return name;
  // A recording's names are anyone's bytes: the demangler is not given more
  // than a real symbol's length (the longest of an H200 PyTorch run: 252 bytes).
  if (std::strlen(name) > kMaxDemangledInput) return name;
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && demangled != nullptr ? std::string(demangled) : std::string(name);
  std::free(demangled);
  return out;
}

std::string CuptiKindName(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    case CUPTI_ACTIVITY_KIND_KERNEL: return "KERNEL";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "DRIVER";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_DEVICE: return "DEVICE";
    case CUPTI_ACTIVITY_KIND_CONTEXT: return "CONTEXT";
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_NAME: return "NAME";
    case CUPTI_ACTIVITY_KIND_MARKER: return "MARKER";
    case CUPTI_ACTIVITY_KIND_OVERHEAD: return "OVERHEAD";
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return "MEMCPY2";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "SYNCHRONIZATION";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return "EXTERNAL_CORRELATION";
    case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API: return "INTERNAL_LAUNCH_API";
    case CUPTI_ACTIVITY_KIND_MEMORY2: return "MEMORY2";
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL: return "MEMORY_POOL";
    default: return "kind " + std::to_string(kind);
  }
}

}  // namespace liveprof
