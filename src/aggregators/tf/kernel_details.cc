// The kernel-stats rules that read names: the launch details string
// (docs/semantics-tf.md §7), which kernels ran on Tensor Cores (by
// kernel family, beyond §7's list) and the op-name eligibility rules. Declared in kernel_stats.h. Pure; any thread.
#include <charconv>
#include <cmath>
#include <string_view>

#include "aggregators/tf/kernel_stats.h"

namespace liveprof {

namespace {

// Which kernels ran on Tensor Cores, by kernel family: one table for every
// view (kernel stats' "Uses TC", the op roll-ups, the overview's top ops,
// the PyTorch page's figure by family). A kernel name says how the kernel
// computes: the library that built it names its math instruction or its
// tensor-core code path. xprof's §7 list (and the PyTorch plugin's copy of
// it, pytorch_gpu_metrics.cc) predates Hopper: it misses sm90 xmma kernels,
// cuBLAS' nvjet, CUTLASS tensor-op and flash attention, and its
// "xmma_gemm" also catches xmma's FFMA (CUDA-core) kernels. Patterns are
// substrings, case-sensitive; a kernel that contains a CUDA-core marker is
// not a tensor-core kernel whatever else it contains.
struct TensorCorePattern {
  std::string_view pattern;
  std::string_view family;
};

// CUDA-core markers, checked first.
constexpr std::string_view kCudaCoreMarkers[] = {
    // xmma kernels that compute in FP32 FMA say so: cuDNN's
    // sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_..._ffma_... and
    // cuBLAS' sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_... (H200 traces).
    "_ffma",
    // CUTLASS's SIMT path: cutlass_80_simt_sgemm_... (OpClassSimt).
    "_simt_",
    // xmma / cask helpers: workspace initialisation, no math.
    "init_device_workspace",
    // Split-K reductions after a GEMM: plain adds (cuBLASLt, CUTLASS).
    "splitKreduce",
    "ReduceSplitK",
    // Built for Maxwell (PyTorch's fmha_cutlassF_f32_..._sm50): no Tensor
    // Cores to compile for.
    "_sm50",
};

constexpr TensorCorePattern kTensorCorePatterns[] = {
    // NVIDIA's xmma library (cuDNN, cuBLAS, TensorRT) is built on the mma
    // instructions: sm80_xmma_* name their instruction ("tensor16x8x8"),
    // sm90_xmma_* are warpgroup kernels ("warpgroupsize", wgmma), sm100_xmma_*
    // tcgen05. Its FFMA kernels are marked above. xprof's xmma_gemm,
    // xmma_implicit_gemm, xmma_sparse_* are this family.
    {"xmma", "xmma"},
    // The tensor-core instructions by name: HMMA (fp16/bf16/tf32 mma.sync,
    // Volta on), IMMA (int8), HGMMA / WGMMA (Hopper's warpgroup MMA) and
    // tcgen05 (Blackwell's fifth-generation Tensor Core).
    {"hmma", "hmma"},
    {"_imma", "imma"},
    {"imma_", "imma"},
    {"gmma", "wgmma"},
    {"tcgen05", "tcgen05"},
    // cuBLAS 12.x's GEMM kernels on Hopper and Blackwell (nvjet_sm90_tst_*,
    // nvjet_sm100_*): cuBLASLt's generated kernels for tensor-core GEMMs
    // (fp16, bf16, tf32, fp8); the H200 bf16 MLP's matmuls.
    {"nvjet", "nvjet"},
    // CUTLASS's OpClassTensorOp kernels: cutlass_tensorop_s1688dgrad_*,
    // cutlass_80_tensorop_*, cutlass3x_sm90_tensorop_*, the mangled
    // ...MmaTensorOp... of cuDNN's own CUTLASS; wmma is the WMMA API
    // (cutlass_80_wmma_tensorop_bf16_s161616gemm_*).
    {"tensorop", "cutlass tensorop"},
    {"TensorOp", "cutlass tensorop"},
    {"wmma", "wmma"},
    // cuBLAS / cuDNN / CUTLASS names carry the mma instruction shape MxNxK
    // behind the type letter (h fp16, s fp32 accumulate or tf32, i int8, c
    // complex): 8x8x4 (Volta), 16x8x8 and 16x8x16 (Turing, Ampere), 16x8x32
    // (int8). From xprof's §7 list.
    {"h884", "mma shape"},
    {"s884", "mma shape"},
    {"h1688", "mma shape"},
    {"s1688", "mma shape"},
    {"c1688", "mma shape"},
    {"16816", "mma shape"},
    {"i8816", "mma shape"},
    {"16832", "mma shape"},
    // Flash attention (Dao's flash_fwd_* / flash_bwd_*, FlashAttention-3's
    // Hopper kernels), PyTorch's memory-efficient attention (xformers'
    // fmha_cutlassF/B: TensorOp on sm75 and later) and cuDNN's SDPA
    // (..._sdpa_..._flash_fprop_...): attention as tensor-core GEMMs.
    {"flash_fwd", "flash attention"},
    {"flash_bwd", "flash attention"},
    {"flash_fprop", "flash attention"},
    {"flash_bprop", "flash attention"},
    {"fmha", "flash attention"},
    // cuDNN's Volta/Turing tensor-core convolutions, as xprof's §7 list names
    // them (kernel_stats_utils.cc).
    {"conv1x1", "cudnn tensor-core conv"},
    {"conv2d_c1_k1", "cudnn tensor-core conv"},
    {"dgrad_1x1_stride_2x2", "cudnn tensor-core conv"},
    {"direct_group", "cudnn tensor-core conv"},
    {"first_layer_wgrad_kernel", "cudnn tensor-core conv"},
};

constexpr std::string_view kEligibleSuffixes[] = {
    "Conv2D",
    "Conv2DBackpropFilter",
    "Conv2DBackpropInput",
    "Conv3D",
    "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropFilter",
    "DepthwiseConv2dNativeBackpropInput",
    "/MatMul",
    "FusedMatMul",
    "/CudnnRNN",
    "XlaDot",
    "XlaDotV2",
};

constexpr std::string_view kEligibleInfixes[] = {
    "BatchMatMul",
    "CudnnRNNV",
    "CudnnRNNForward",
    "CudnnRNNBackprop",
};

// PyTorch ops the profiler plugin calls Tensor Core eligible: exact names
// (torch_tb_profiler's op allowlist: the ops autocast runs in fp16, from
// ATen's autocast_mode.cpp, and the backward ops they were seen to launch).
constexpr std::string_view kTorchEligible[] = {
    "aten::_convolution",
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::conv_tbc",
    "aten::conv_transpose1d",
    "aten::conv_transpose2d",
    "aten::conv_transpose3d",
    "aten::convolution",
    "aten::cudnn_convolution",
    "aten::cudnn_convolution_transpose",
    "aten::prelu",
    "aten::addmm",
    "aten::addmv",
    "aten::addr",
    "aten::matmul",
    "aten::mm",
    "aten::mv",
    "aten::linear",
    "aten::addbmm",
    "aten::baddbmm",
    "aten::bmm",
    "aten::chain_matmul",
    "aten::linalg_multi_dot",
    "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_gru_cell",
    "aten::lstm_cell",
    "aten::gru_cell",
    "aten::rnn_tanh_cell",
    "aten::rnn_relu_cell",
    // backward
    "CudnnConvolutionBackward",
    "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward",
    "CudnnConvolutionTransposeBackward",
    "MmBackward",
    "aten::cudnn_convolution_backward_weight",
    "aten::addmm_",
    "AddmvBackward",
    "MvBackward",
    "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input",
    "AddmmBackward",
    "aten::cudnn_convolution_backward_input",
    "AddbmmBackward",
    "aten::cudnn_convolution_backward",
};

// absl::SimpleAtoi-like: surrounding ASCII whitespace allowed, optional '+',
// decimal digits, must fit in uint32.
std::string_view TrimAscii(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

bool ParseU32(std::string_view s, uint32_t* out) {
  s = TrimAscii(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() < '0' || s.front() > '9') return false;
  uint32_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return false;
  *out = v;
  return true;
}

bool ParseFiniteDouble(std::string_view s, double* out) {
  s = TrimAscii(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ParseDims(std::string_view s, std::array<uint32_t, 3>* out) {
  std::array<uint32_t, 3> v{};
  for (int i = 0; i < 3; ++i) {
    const size_t comma = s.find(',');
    if ((i < 2) != (comma != std::string_view::npos)) return false;  // exactly 3 parts.
    if (!ParseU32(s.substr(0, comma), &v[i])) return false;
    if (i < 2) s.remove_prefix(comma + 1);
  }
  *out = v;
  return true;
}

}  // namespace

KernelDetails ParseKernelDetails(std::string_view details) {
  KernelDetails d;
  while (!details.empty()) {
    const size_t sep = details.find_first_of(" \n");
    const std::string_view token = details.substr(0, sep);
    details.remove_prefix(sep == std::string_view::npos ? details.size() : sep + 1);
    const size_t colon = token.find(':');
    if (colon == std::string_view::npos || token.find(':', colon + 1) != std::string_view::npos) {
      continue;  // not exactly `key:value`.
    }
    const std::string_view key = token.substr(0, colon);
    const std::string_view value = token.substr(colon + 1);
    uint32_t v = 0;
    double pct = 0;
    if (key == "regs") {
      if (ParseU32(value, &v)) d.registers_per_thread = v;
    } else if (key == "static_shared") {
      if (ParseU32(value, &v)) d.static_shared_bytes = v;
    } else if (key == "dynamic_shared") {
      if (ParseU32(value, &v)) d.dynamic_shared_bytes = v;
    } else if (key == "block") {
      ParseDims(value, &d.block);
    } else if (key == "grid") {
      ParseDims(value, &d.grid);
    } else if (key == "occ_pct") {
      if (ParseFiniteDouble(value, &pct)) d.occupancy_pct = pct, d.has_occupancy = true;
    } else if (key == "blocks_per_sm") {
      if (ParseFiniteDouble(value, &pct)) d.blocks_per_sm = pct;
    } else if (key == "warps_per_sm") {
      if (ParseFiniteDouble(value, &pct)) d.warps_per_sm = pct;
    }
  }
  return d;
}

std::string_view TensorCoreFamily(std::string_view kernel_name) {
  for (std::string_view m : kCudaCoreMarkers) {
    if (kernel_name.find(m) != std::string_view::npos) return {};
  }
  for (const TensorCorePattern& p : kTensorCorePatterns) {
    if (kernel_name.find(p.pattern) != std::string_view::npos) return p.family;
  }
  return {};
}

bool KernelUsesTensorCore(std::string_view kernel_name) { return !TensorCoreFamily(kernel_name).empty(); }

bool IsOpTensorCoreEligible(std::string_view op_name) {
  for (std::string_view s : kTorchEligible) {
    if (op_name == s) return true;
  }
  for (std::string_view s : kEligibleSuffixes) {
    if (op_name.ends_with(s)) return true;
  }
  for (std::string_view s : kEligibleInfixes) {
    if (op_name.find(s) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace liveprof
