// CUPTI's names, for the record parser (cupti_records.h): the API calls a
// training job makes most (so that names, and the launch detection of
// steps.h, work without cuptiGetCallbackName), the activity kinds, the
// overhead kinds. Tables only: no state.
#ifndef LIVEPROF_PRODUCERS_CUPTI_NAMES_H_
#define LIVEPROF_PRODUCERS_CUPTI_NAMES_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace liveprof {

// The name of API callback `cbid` of the driver (true) or runtime (false)
// domain from the built-in table ("cudaLaunchKernel"), or null.
const char* BuiltinCuptiApiName(bool driver, uint32_t cbid);

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (CUPTI's callback names
// carry the version of the entry point; ours do not).
std::string_view StripCuptiVersion(std::string_view name);

// A kernel's name as users read it: CUPTI gives the compiler's (mangled)
// symbol, "_Z11scal_kernelIffLi1E...", which the C++ ABI's demangler turns
// into "void scal_kernel<float, float, 1, ...>(cublasTransposeParams<float>,
// ...)", the name torch.profiler, Kineto's traces and xprof show. Names that
// are not mangled (extern "C", Triton's, "sm80_xmma_...") come back as they
// are, and so does one the demangler refuses or one over 4 KiB.
std::string DemangledKernelName(const char* name);

// "CUPTI overhead: buffer flush"... for a CUpti_ActivityOverheadKind.
const char* OverheadName(uint32_t kind);

// True for the overhead kinds that are CUPTI's own work, time the program
// would not spend without the profiler: buffer flush, instrumentation,
// resource creation, activity buffer requests, UVM activity setup. False for
// CUDA's own (the driver's JIT compiler, lazy module and function loading, a
// full command buffer), which the program pays profiled or not.
bool IsCuptiOwnOverhead(uint32_t kind);

// "CONCURRENT_KERNEL", "MEMCPY"... for a CUpti_ActivityKind; "kind N" for
// one this build does not name.
std::string CuptiKindName(uint32_t kind);

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_CUPTI_NAMES_H_
