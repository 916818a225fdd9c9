// Launch wrappers of the example's two kernels (gpu_kernels.cu).
#ifndef LIVEPROF_EXAMPLES_GPU_KERNELS_H_
#define LIVEPROF_EXAMPLES_GPU_KERNELS_H_

void LaunchScale(float* x, float a, int n);                 // x *= a
void LaunchAxpy(float* y, const float* x, float a, int n);  // y += a * x

#endif  // LIVEPROF_EXAMPLES_GPU_KERNELS_H_
