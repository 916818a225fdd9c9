#include "aggregators/pytorch/pytorch_gpu_metrics.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aggregators/pytorch/py_format.h"
#include "aggregators/tf/kernel_stats.h"

namespace liveprof {

namespace {

// tensor_core.py's TC_Allowlist (xprof's list of docs/semantics-tf.md §7, less "i16832").
constexpr std::string_view kPluginTensorCorePatterns[] = {
    "h884",
    "s884",
    "h1688",
    "s1688",
    "hmma",
    "i8816",
    "16816",
    "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel",
    "conv1x1",
    "conv2d_c1_k1",
    "direct_group",
    "xmma_implicit_gemm",
    "xmma_sparse_conv",
    "xmma_warp_specialized_implicit_gemm",
    "xmma_gemm",
    "xmma_sparse_gemm",
    "c1688",
};

struct Kernel {
  int64_t ts, end;
  double blocks_per_sm;  // > 0 where given.
  double occupancy;      // < 0 where not given.
};

int64_t Clip(int64_t begin, int64_t end, int64_t w_begin, int64_t w_end) {
  return std::max<int64_t>(0, std::min(end, w_end) - std::max(begin, w_begin));
}

}  // namespace

bool PluginKernelUsesTensorCores(std::string_view kernel_name) {
  for (const std::string_view p : kPluginTensorCorePatterns) {
    if (kernel_name.find(p) != std::string_view::npos) return true;
  }
  return false;
}

namespace {

// One GPU's kernels, and its Tensor Core sums.
struct GpuKernels {
  std::vector<Kernel> kernels;
  uint64_t op_kernel_ns = 0, tc_kernel_ns = 0;
  // Every kernel's time, and its part by TensorCoreFamily (not the plugin's
  // rule: what the GPU ran, driver-API launches included).
  uint64_t all_kernel_ns = 0, family_tc_kernel_ns = 0;
};

PytorchGpuEstimates Estimate(GpuKernels& g, bool op_kernels, int64_t w_begin, int64_t w_end) {
  PytorchGpuEstimates out;
  std::vector<Kernel>& kernels = g.kernels;
  // Ratios as the plugin forms them, in µs floats: round(100 * (a / b), 2).
  auto us = [](double ns) { return ns / 1000.0; };
  if (op_kernels) {
    out.has_tensor_cores = true;
    out.tensor_cores_pct =
        g.op_kernel_ns == 0
            ? 0.0
            : PyRound(100.0 * (us(static_cast<double>(g.tc_kernel_ns)) / us(static_cast<double>(g.op_kernel_ns))), 2);
  }
  out.tensor_cores_by_family_pct =
      g.all_kernel_ns == 0
          ? 0.0
          : PyRound(100.0 * static_cast<double>(g.family_tc_kernel_ns) / static_cast<double>(g.all_kernel_ns), 2);
  const int64_t w_len = w_end - w_begin;
  if (w_len <= 0) return out;
  std::stable_sort(kernels.begin(), kernels.end(), [](const Kernel& a, const Kernel& b) { return a.ts < b.ts; });

  // Est. SM Efficiency: a sweep over the kernels with blocks per SM > 0,
  // starts before ends at equal times, the running (float) sum of blocks per
  // SM capped at 1 on each elementary interval, weighted by its length in W.
  struct Point {
    int64_t t;
    bool end;
    double blocks;
    size_t order;
  };
  std::vector<Point> points;
  for (const Kernel& k : kernels) {
    if (k.blocks_per_sm <= 0) continue;
    points.push_back({k.ts, false, k.blocks_per_sm, points.size()});
    points.push_back({k.end, true, k.blocks_per_sm, points.size()});
  }
  std::stable_sort(points.begin(), points.end(),
                   [](const Point& a, const Point& b) { return a.t != b.t ? a.t < b.t : (!a.end && b.end); });
  double running = 0, weighted = 0;
  bool inside = false;
  for (size_t i = 0; i < points.size(); ++i) {
    if (i > 0 && running > 0) {
      const int64_t len = Clip(points[i - 1].t, points[i].t, w_begin, w_end);
      if (len > 0) {
        inside = true;
        weighted += std::min(running, 1.0) * us(static_cast<double>(len));
      }
    }
    running += points[i].end ? -points[i].blocks : points[i].blocks;
  }
  if (inside) {
    out.has_sm_efficiency = true;
    out.sm_efficiency_pct = PyRound(100.0 * (weighted / us(static_cast<double>(w_len))), 2);
  }

  // Est. Achieved Occupancy: the kernels' occupancy weighted by their length in W.
  double occupancy_sum = 0, clipped_sum = 0;
  for (const Kernel& k : kernels) {
    if (k.occupancy < 0) continue;
    const double len = us(static_cast<double>(Clip(k.ts, k.end, w_begin, w_end)));
    occupancy_sum += k.occupancy * len;
    clipped_sum += len;
  }
  if (clipped_sum > 0) {
    out.has_occupancy = true;
    out.occupancy_pct = PyRound(occupancy_sum / clipped_sum, 2);
  }
  return out;
}

}  // namespace

std::map<uint8_t, PytorchGpuEstimates> EstimateGpus(std::span<const Event> events, const Catalog& catalog,
                                                    int64_t w_begin, int64_t w_end) {
  // Tensor Cores count the kernels an operator launched through a Runtime
  // (the plugin ignores cuda_driver calls): an op (Kineto's External id,
  // payload.kernel.op) and a runtime-API launch with its correlation id.
  std::unordered_set<uint32_t> runtime_launches;
  for (const Event& e : events) {
    if (e.kind == EventKind::kRuntimeApi && e.sub != static_cast<uint8_t>(ApiLayer::kDriver) && e.corr != 0) {
      runtime_launches.insert(e.corr);
    }
  }
  std::unordered_map<NameId, KernelDetails> details;  // parsed once per details string.
  struct TensorCoreRules {
    bool plugin;  // the plugin's allowlist.
    bool family;  // TensorCoreFamily: what the hardware ran.
  };
  std::unordered_map<NameId, TensorCoreRules> tensor_cores;  // once per kernel name.
  std::map<uint8_t, GpuKernels> gpus;
  bool op_kernels = false;  // on any GPU: the row is shown for each (0.0 for one without).
  for (const Event& e : events) {
    if (e.kind != EventKind::kKernel || e.dur > kMaxEventDurationNs || e.ts > kMaxEventDurationNs) continue;
    auto d = details.find(e.payload.kernel.details);
    if (d == details.end()) {
      d = details.emplace(e.payload.kernel.details, ParseKernelDetails(catalog.Name(e.payload.kernel.details))).first;
    }
    GpuKernels& g = gpus[e.device];
    const auto ts = static_cast<int64_t>(e.ts);
    g.kernels.push_back({ts, ts + static_cast<int64_t>(e.dur), d->second.blocks_per_sm,
                         d->second.has_occupancy ? d->second.occupancy_pct : -1.0});
    // Tensor Cores: by name, over the kernels' whole time.
    auto tc = tensor_cores.find(e.name);
    if (tc == tensor_cores.end()) {
      const std::string_view name = catalog.Name(e.name);
      tc = tensor_cores.emplace(e.name, TensorCoreRules{PluginKernelUsesTensorCores(name), KernelUsesTensorCore(name)})
               .first;
    }
    g.all_kernel_ns += e.dur;
    if (tc->second.family) g.family_tc_kernel_ns += e.dur;
    if (e.payload.kernel.op != 0 && runtime_launches.count(e.corr) != 0) {
      op_kernels = true;
      g.op_kernel_ns += e.dur;
      if (tc->second.plugin) g.tc_kernel_ns += e.dur;
    }
  }
  std::map<uint8_t, PytorchGpuEstimates> out;
  for (auto& [device, g] : gpus) out[device] = Estimate(g, op_kernels, w_begin, w_end);
  return out;
}

}  // namespace liveprof
