// The kernel-stats rules that read names (tf-profiler-semantics.md §7): the
// launch details string, the TensorCore kernel patterns and the op-name
// eligibility rules. Declared in kernel_stats.h. Pure; any thread.
#include <charconv>
#include <cmath>
#include <string_view>

#include "aggregators/kernel_stats.h"

namespace liveprof {

namespace {

// §7, from xprof's kernel_stats_utils.cc.
constexpr std::string_view kTensorCorePatterns[] = {
    "16816",
    "c1688",
    "conv1x1",
    "conv2d_c1_k1",
    "dgrad_1x1_stride_2x2",
    "direct_group",
    "first_layer_wgrad_kernel",
    "h1688",
    "h884",
    "hmma",
    "i16832",
    "i8816",
    "s884",
    "s1688",
    "xmma_gemm",
    "xmma_implicit_gemm",
    "xmma_sparse_conv",
    "xmma_sparse_gemm",
    "xmma_warp_specialized_implicit_gemm",
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
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::convolution",
    "aten::cudnn_convolution", "aten::cudnn_convolution_transpose", "aten::prelu", "aten::addmm", "aten::addmv",
    "aten::addr", "aten::matmul", "aten::mm", "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm",
    "aten::bmm", "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell",
    "aten::rnn_relu_cell",
    // backward
    "CudnnConvolutionBackward", "BmmBackward0", "aten::cudnn_convolution_transpose_backward",
    "CudnnConvolutionTransposeBackward", "MmBackward", "aten::cudnn_convolution_backward_weight", "aten::addmm_",
    "AddmvBackward", "MvBackward", "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input", "AddmmBackward", "aten::cudnn_convolution_backward_input",
    "AddbmmBackward", "aten::cudnn_convolution_backward",
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

bool KernelUsesTensorCore(std::string_view kernel_name) {
  for (std::string_view p : kTensorCorePatterns) {
    if (kernel_name.find(p) != std::string_view::npos) return true;
  }
  return false;
}

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
