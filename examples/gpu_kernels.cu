// The example's kernels and their launch wrappers, compiled by nvcc as
// C++17 (CMake 3.25 cannot ask nvcc for C++20); gpu_capture.cc, the C++20
// part that uses liveprof, calls them.
#include "gpu_kernels.h"

namespace {

__global__ void Scale(float* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void Axpy(float* y, const float* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

}  // namespace

void LaunchScale(float* x, float a, int n) { Scale<<<(n + 255) / 256, 256>>>(x, a, n); }

void LaunchAxpy(float* y, const float* x, float a, int n) { Axpy<<<(n + 255) / 256, 256>>>(y, x, a, n); }
