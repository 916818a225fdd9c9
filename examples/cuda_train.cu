// cuda_train: a small CUDA training loop under liveprof, as a user would
// write it: host API steps, an input span and framework ops, a CuptiSource
// on GlobalStream() (PushOp for the ops), sent to `liveprof serve --ingest
// unix:SOCK` through the ingest client. Per step: the batch is "loaded" on
// the host (input span), copied host-to-device, a tiled matmul forward and
// one backward, an in-place relu, an SGD update, a device-to-device copy of
// the weights, two memsets, a cudaMalloc/cudaFree and a cudaMallocAsync/
// cudaFreeAsync pair, and the 4-byte loss copied back. At the end it prints,
// as one JSON object on stdout, what it did: kernels by name, copies by
// direction and bytes, memsets, allocations and frees, steps.
// scripts/gpu-check.sh compares that with what the server's views show.
//
//   cuda_train [--steps N] [--connect unix:SOCK] [--level default|full]
//              [--record FILE]
//   cuda_train --overhead off|default|full [--launches N]
//     a launch-bound loop of empty kernels (the worst case for tracing):
//     prints {"overhead": {"level": ..., "us_per_launch": ...}}, the
//     median of 5 rounds of N launches + a synchronize, per launch.
//
// For a machine with an NVIDIA GPU; built whenever CMake finds nvcc.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ingest/ingest_sender.h"
#include "producers/cupti_source.h"
#include "producers/host_api.h"

namespace {

constexpr int kN = 512;      // matrices are kN x kN floats: 1 MiB.
constexpr int kTile = 16;    // matmul tile: 16 x 16 threads, 2 x 1 KiB of shared memory.
constexpr int kBlock = 256;  // threads per block of the elementwise kernels.
constexpr size_t kElems = size_t{kN} * kN;
constexpr size_t kBytes = kElems * sizeof(float);

// extern "C": CUPTI reports these names as written (no C++ mangling).
extern "C" __global__ void matmul_tiled(const float* a, const float* b, float* c, int n) {
  __shared__ float ta[kTile][kTile];
  __shared__ float tb[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float sum = 0.0f;
  for (int t = 0; t < n; t += kTile) {
    ta[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
    tb[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
    __syncthreads();
    for (int k = 0; k < kTile; ++k) sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }
  c[row * n + col] = sum;
}

extern "C" __global__ void relu_inplace(float* x, size_t n) {
  const size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] = fmaxf(x[i], 0.0f);
}

extern "C" __global__ void sgd_update(float* w, const float* grad, float lr, size_t n) {
  const size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (i < n) w[i] -= lr * grad[i];
}

extern "C" __global__ void empty_kernel() {}

bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cuda_train: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}
#define CHECK_CUDA(call)                  \
  do {                                    \
    if (!Ok((call), #call)) std::exit(1); \
  } while (0)

// A framework op: its host span (LIVEPROF_OP) and, for the device work it
// launches, CUPTI's external correlation id (CuptiSource::PushOp).
class GpuOp {
 public:
  GpuOp(liveprof::CuptiSource* cupti, liveprof::NameId op) : cupti_(cupti) {
    if (cupti_ != nullptr) cupti_->PushOp(op);
  }
  ~GpuOp() {
    if (cupti_ != nullptr) cupti_->PopOp();
  }

 private:
  liveprof::CuptiSource* cupti_;
};
#define TRAIN_OP(cupti, name) \
  LIVEPROF_OP(name);          \
  GpuOp LIVEPROF_CONCAT(gpu_op_, __LINE__)((cupti), LIVEPROF_NAME_ID(name))

// What the program did, for the JSON at the end.
struct Done {
  std::map<std::string, int> kernels;
  std::map<std::string, std::pair<int, uint64_t>> copies;  // direction -> (count, bytes).
  int memsets = 0;
  uint64_t memset_bytes = 0;
  int mallocs = 0, frees = 0, async_mallocs = 0, async_frees = 0;
  int steps = 0;

  void Copy(const char* direction, uint64_t bytes) {
    ++copies[direction].first;
    copies[direction].second += bytes;
  }
  void Print(const std::string& cupti_message) const {
    std::printf("{\"steps\": %d, \"kernels\": {", steps);
    const char* sep = "";
    for (const auto& [name, n] : kernels) {
      std::printf("%s\"%s\": %d", sep, name.c_str(), n);
      sep = ", ";
    }
    std::printf("}, \"copies\": {");
    sep = "";
    for (const auto& [dir, cb] : copies) {
      std::printf("%s\"%s\": {\"count\": %d, \"bytes\": %llu}", sep, dir.c_str(), cb.first,
                  static_cast<unsigned long long>(cb.second));
      sep = ", ";
    }
    std::printf("}, \"memsets\": {\"count\": %d, \"bytes\": %llu}, ", memsets,
                static_cast<unsigned long long>(memset_bytes));
    std::printf(
        "\"allocs\": {\"cudaMalloc\": %d, \"cudaFree\": %d, \"cudaMallocAsync\": %d, "
        "\"cudaFreeAsync\": %d}, ",
        mallocs, frees, async_mallocs, async_frees);
    std::string escaped;
    for (char c : cupti_message) {
      if (c == '"' || c == '\\') escaped += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) escaped += c;
    }
    std::printf("\"cupti\": \"%s\"}\n", escaped.c_str());
  }
};

struct Args {
  int steps = 20;
  std::string connect;
  std::string level;
  std::string record;
  std::string overhead;  // "" (train), "off", "default", "full".
  int launches = 20000;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--steps" && has_value) {
      a->steps = std::atoi(argv[++i]);
    } else if (arg == "--connect" && has_value) {
      a->connect = argv[++i];
    } else if (arg == "--level" && has_value) {
      a->level = argv[++i];
    } else if (arg == "--record" && has_value) {
      a->record = argv[++i];
    } else if (arg == "--overhead" && has_value) {
      a->overhead = argv[++i];
    } else if (arg == "--launches" && has_value) {
      a->launches = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: cuda_train [--steps N] [--connect unix:SOCK] [--level default|full] "
                   "[--record FILE]\n       cuda_train --overhead off|default|full [--launches N]\n");
      return false;
    }
  }
  return true;
}

// Starts a CuptiSource at `level` ("" = its default); null if GPU tracing is
// unavailable (said on stderr).
std::unique_ptr<liveprof::CuptiSource> StartCupti(const std::string& level, const std::string& record) {
  liveprof::CuptiSource::Options options;
  if (!level.empty()) {
    liveprof::CuptiLevel l;
    if (!liveprof::ParseCuptiLevel(level, &l)) {
      std::fprintf(stderr, "cuda_train: --level %s is not default or full\n", level.c_str());
      std::exit(2);
    }
    options.level = l;
  }
  // The recorder's variable (cupti_source.h, "Recording"): what a user
  // without code changes would set.
  if (!record.empty()) setenv("LIVEPROF_CUPTI_RECORD", record.c_str(), 1);
  auto cupti = std::make_unique<liveprof::CuptiSource>(liveprof::GlobalStream(), options);
  if (!cupti->Start()) {
    std::fprintf(stderr, "cuda_train: GPU tracing unavailable: %s\n", cupti->message().c_str());
    return nullptr;
  }
  std::fprintf(stderr, "cuda_train: %s\n", cupti->message().c_str());
  return cupti;
}

// The launch-bound loop: per launch + run, in microseconds.
int Overhead(const Args& args) {
  std::unique_ptr<liveprof::CuptiSource> cupti;
  if (args.overhead != "off") {
    cupti = StartCupti(args.overhead, "");
    if (cupti == nullptr) return 2;
  }
  CHECK_CUDA(cudaFree(nullptr));  // the context, outside the measure.
  for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 1>>>();
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < args.launches; ++i) empty_kernel<<<1, 1>>>();
    CHECK_CUDA(cudaDeviceSynchronize());
    const auto t1 = std::chrono::steady_clock::now();
    rounds.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / args.launches);
  }
  std::sort(rounds.begin(), rounds.end());
  if (cupti) cupti->Stop();
  std::printf(
      "{\"overhead\": {\"level\": \"%s\", \"launches\": %d, \"rounds\": 5, "
      "\"us_per_launch\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f}}\n",
      args.overhead.c_str(), args.launches, rounds[2], rounds.front(), rounds.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) return 2;
  if (!args.overhead.empty()) return Overhead(args);

  if (!args.connect.empty()) {
    liveprof::SenderOptions sender;
    sender.address = args.connect;
    sender.program = "cuda_train";
    std::string error;
    if (!liveprof::ConnectGlobalStream(sender, &error)) {
      std::fprintf(stderr, "cuda_train: --connect %s: %s\n", args.connect.c_str(), error.c_str());
      return 2;
    }
  }
  std::unique_ptr<liveprof::CuptiSource> cupti = StartCupti(args.level, args.record);
  if (cupti == nullptr) return 2;
  liveprof::CuptiSource* c = cupti.get();

  Done done;
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  std::vector<float> host_batch(kElems);
  float *w = nullptr, *w_copy = nullptr, *x = nullptr;
  CHECK_CUDA(cudaMalloc(&w, kBytes));
  CHECK_CUDA(cudaMalloc(&w_copy, kBytes));
  CHECK_CUDA(cudaMalloc(&x, kBytes));
  done.mallocs += 3;
  CHECK_CUDA(cudaMemset(w, 0, kBytes));
  ++done.memsets;
  done.memset_bytes += kBytes;

  const dim3 mm_grid(kN / kTile, kN / kTile), mm_block(kTile, kTile);
  const unsigned elem_grid = static_cast<unsigned>((kElems + kBlock - 1) / kBlock);
  float loss = 0.0f;
  for (int step = 0; step < args.steps; ++step) {
    LIVEPROF_STEP(step);
    {
      LIVEPROF_INPUT("IteratorGetNext");
      for (size_t i = 0; i < kElems; ++i) host_batch[i] = static_cast<float>((i + step) % 7) - 3.0f;
    }
    CHECK_CUDA(cudaMemcpyAsync(x, host_batch.data(), kBytes, cudaMemcpyHostToDevice, stream));
    done.Copy("HtoD", kBytes);
    float* act = nullptr;
    float* grad = nullptr;
    CHECK_CUDA(cudaMallocAsync(&act, kBytes, stream));
    ++done.async_mallocs;
    CHECK_CUDA(cudaMalloc(&grad, kBytes));
    ++done.mallocs;
    {
      TRAIN_OP(c, "model/dense/MatMul:MatMul");
      matmul_tiled<<<mm_grid, mm_block, 0, stream>>>(x, w, act, kN);
      ++done.kernels["matmul_tiled"];
    }
    {
      TRAIN_OP(c, "model/dense/Relu:Relu");
      relu_inplace<<<elem_grid, kBlock, 0, stream>>>(act, kElems);
      ++done.kernels["relu_inplace"];
    }
    {
      TRAIN_OP(c, "model/dense/MatMul_grad:MatMul");
      CHECK_CUDA(cudaMemsetAsync(grad, 0, kBytes, stream));
      ++done.memsets;
      done.memset_bytes += kBytes;
      matmul_tiled<<<mm_grid, mm_block, 0, stream>>>(act, x, grad, kN);
      ++done.kernels["matmul_tiled"];
    }
    {
      TRAIN_OP(c, "optimizer/SGD:ApplyGradientDescent");
      sgd_update<<<elem_grid, kBlock, 0, stream>>>(w, grad, 1e-6f, kElems);
      ++done.kernels["sgd_update"];
    }
    {
      TRAIN_OP(c, "optimizer/EMA:Copy");
      CHECK_CUDA(cudaMemcpyAsync(w_copy, w, kBytes, cudaMemcpyDeviceToDevice, stream));
      done.Copy("DtoD", kBytes);
      CHECK_CUDA(cudaMemsetAsync(act, 0, kBytes, stream));
      ++done.memsets;
      done.memset_bytes += kBytes;
    }
    CHECK_CUDA(cudaMemcpyAsync(&loss, act, sizeof loss, cudaMemcpyDeviceToHost, stream));
    done.Copy("DtoH", sizeof loss);
    CHECK_CUDA(cudaFreeAsync(act, stream));
    ++done.async_frees;
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaFree(grad));
    ++done.frees;
    ++done.steps;
  }
  CHECK_CUDA(cudaFree(w));
  CHECK_CUDA(cudaFree(w_copy));
  CHECK_CUDA(cudaFree(x));
  done.frees += 3;
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaDeviceSynchronize());

  const std::string message = cupti->message();
  cupti->Stop();
  if (!args.connect.empty()) liveprof::DisconnectGlobalStream(5'000'000'000);
  done.Print(message);
  return 0;
}
