// gpu_capture: the CUPTI producer on a real GPU. Launches a known number of
// kernels, copies, memsets and allocations under liveprof's CuptiSource and
// prints what the stream captured next to what the program did, kind by kind.
// Exit status 0 when every launched kernel, copy and memset was captured.
//
// For a GPU machine, not CI. Built only with nvcc and
// -DLIVEPROF_GPU_EXAMPLES=ON:
//   cmake -S . -B build-gpu -DLIVEPROF_GPU_EXAMPLES=ON && cmake --build build-gpu --target gpu_capture
//   build-gpu/bin/gpu_capture
// With NVTX_INJECTION64_PATH=/usr/local/cuda/lib/libcupti.so.13 in the
// environment, NVTX ranges would be captured too (this program uses none).
#include <cuda_runtime.h>  // (the template cudaMalloc(T**) lives here)

#include <array>
#include <atomic>
#include <cstdio>
#include <vector>

#include "gpu_kernels.h"
#include "producers/cupti_source.h"
#include "producers/host_api.h"
#include "stream/drain_loop.h"

namespace {

bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "gpu_capture: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  using liveprof::EventKind;
  liveprof::Stream& stream = liveprof::GlobalStream();
  std::array<std::atomic<uint64_t>, liveprof::kEventKindCount> seen{};
  std::atomic<uint64_t> kernels_with_op{0};
  liveprof::DrainLoop drain(stream, liveprof::DrainLoop::Options{}, [&](const liveprof::Batch& b) {
    for (std::span<const liveprof::Event> part : {b.events, b.late}) {
      for (const liveprof::Event& e : part) {
        seen[static_cast<size_t>(e.kind)].fetch_add(1, std::memory_order_relaxed);
        if (e.kind == EventKind::kKernel && e.payload.kernel.op != 0) kernels_with_op.fetch_add(1);
      }
    }
  });
  drain.Start();

  liveprof::CuptiSource cupti(stream);
  if (!cupti.Start()) {
    std::fprintf(stderr, "gpu_capture: GPU tracing unavailable: %s\n", cupti.message().c_str());
    drain.Stop();
    return 2;
  }
  std::printf("gpu_capture: %s\n", cupti.message().c_str());

  constexpr int kSteps = 10, kKernelsPerStep = 30, kN = 1 << 20;
  uint64_t kernels = 0, h2d = 0, d2h = 0, memsets = 0, allocs = 0;
  std::vector<float> host(kN, 1.0f);
  const liveprof::NameId op = liveprof::InternName("example/Axpy:Axpy");
  for (int step = 0; step < kSteps; ++step) {
    LIVEPROF_STEP(step);
    float* x = nullptr;
    float* y = nullptr;
    if (!Check(cudaMalloc(&x, kN * sizeof(float)), "cudaMalloc") ||
        !Check(cudaMalloc(&y, kN * sizeof(float)), "cudaMalloc")) {
      return 1;
    }
    allocs += 2;
    Check(cudaMemcpy(x, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice), "H2D");
    ++h2d;
    Check(cudaMemset(y, 0, kN * sizeof(float)), "cudaMemset");
    ++memsets;
    for (int k = 0; k < kKernelsPerStep; ++k) {
      LIVEPROF_OP("example/Axpy:Axpy");
      cupti.PushOp(op);
      if (k % 2 == 0) {
        LaunchScale(x, 1.001f, kN);
      } else {
        LaunchAxpy(y, x, 0.5f, kN);
      }
      cupti.PopOp();
      ++kernels;
    }
    Check(cudaMemcpy(host.data(), y, kN * sizeof(float), cudaMemcpyDeviceToHost), "D2H");
    ++d2h;
    Check(cudaFree(x), "cudaFree");
    Check(cudaFree(y), "cudaFree");
  }
  Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cupti.Stop();
  drain.Stop();

  auto got = [&](EventKind k) { return seen[static_cast<size_t>(k)].load(); };
  std::printf("\n%-22s %10s %10s\n", "", "launched", "captured");
  std::printf("%-22s %10llu %10llu\n", "kernels", (unsigned long long)kernels,
              (unsigned long long)got(EventKind::kKernel));
  std::printf("%-22s %10s %10llu\n", "  with their op", "", (unsigned long long)kernels_with_op.load());
  std::printf("%-22s %10llu %10llu\n", "copies host->device", (unsigned long long)h2d,
              (unsigned long long)got(EventKind::kMemcpyHtoD));
  std::printf("%-22s %10llu %10llu\n", "copies device->host", (unsigned long long)d2h,
              (unsigned long long)got(EventKind::kMemcpyDtoH));
  std::printf("%-22s %10llu %10llu\n", "memsets", (unsigned long long)memsets,
              (unsigned long long)got(EventKind::kMemset));
  std::printf("%-22s %10llu %10llu (frees %llu)\n", "allocations", (unsigned long long)allocs,
              (unsigned long long)got(EventKind::kAlloc), (unsigned long long)got(EventKind::kFree));
  std::printf("%-22s %10s %10llu\n", "runtime API calls", "", (unsigned long long)got(EventKind::kRuntimeApi));
  std::printf("%-22s %10s %10llu\n", "CUPTI dropped records", "", (unsigned long long)cupti.dropped());
  const bool ok = got(EventKind::kKernel) == kernels && got(EventKind::kMemcpyHtoD) == h2d &&
                  got(EventKind::kMemcpyDtoH) == d2h && got(EventKind::kMemset) == memsets;
  std::printf("\n%s\n",
              ok ? "every kernel, copy and memset was captured" : "MISSING: some launched work was not captured");
  return ok ? 0 : 1;
}
