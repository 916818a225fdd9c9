// The PyTorch plugin's GPU summary rows computed from the kernels' launch
// details (docs/semantics-pytorch.md §5): Est. SM Efficiency (from Kineto's
// "blocks per SM"), Est. Achieved Occupancy ("est. achieved occupancy %")
// and Kernel Time using Tensor Cores (kernel names against the plugin's
// TC_Allowlist, over the kernels an operator launched through a runtime
// call), each per GPU and only where the trace has what it needs.
// Pure; part of ComputePytorchOverview.
#ifndef LIVEPROF_AGGREGATORS_PYTORCH_PYTORCH_GPU_METRICS_H_
#define LIVEPROF_AGGREGATORS_PYTORCH_PYTORCH_GPU_METRICS_H_

#include <cstdint>
#include <map>
#include <span>
#include <string_view>

#include "aggregators/catalog.h"
#include "stream/event.h"

namespace liveprof {

struct PytorchGpuEstimates {
  // Each value is round(x, 2) as the plugin shows it; has_* false where the
  // plugin leaves the row out.
  bool has_sm_efficiency = false;
  double sm_efficiency_pct = 0;
  bool has_occupancy = false;
  double occupancy_pct = 0;
  bool has_tensor_cores = false;
  double tensor_cores_pct = 0;  // the plugin's allowlist.
  // Every kernel's time on this GPU, the part by TensorCoreFamily
  // (kernel_stats.h): what ran on Tensor Cores, Hopper's and Blackwell's
  // families and driver-API launches included; round(x, 2).
  double tensor_cores_by_family_pct = 0;
};

// The plugin's TC_Allowlist: a kernel whose name contains one of its
// substrings ran on Tensor Cores (tensor_core.py).
bool PluginKernelUsesTensorCores(std::string_view kernel_name);

// The estimates of each GPU with kernels among `events` (bad spans
// skipped, as the view skips them), over the window [w_begin, w_end) (the
// kept steps): one pass for every GPU.
std::map<uint8_t, PytorchGpuEstimates> EstimateGpus(std::span<const Event> events, const Catalog& catalog,
                                                    int64_t w_begin, int64_t w_end);

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_PYTORCH_PYTORCH_GPU_METRICS_H_
