// CUPTI record parsing throughput.
//
//   BM_CuptiParse/shuffled:0  CuptiRecordParser::Parse over one ~4 MiB
//       activity buffer (one buffer of the source's pool) of real CUDA 13
//       records as a training loop makes them: per operation its runtime API
//       record then its device record (one in five device records late, after
//       the next API record); operations are 88 % kernel launches (7 % of
//       them under a new framework op: an external correlation), 5 % memcpy,
//       4 % memset, 3 % cudaMalloc/cudaFree (MEMORY2). So about half the
//       records are API, 44 % kernels. 300 kernel names of 60 to 150
//       characters, 120 launch shapes, 2 GPUs x 4 streams, 4 threads.
//   BM_CuptiParse/shuffled:1  the same records in random order: no runs for
//       the branch predictor, the worst case.
// Timestamps go through a fitted ClockMap; events go to a ring drained (no-op
// consumer) after each buffer, inside the timing. items_per_second = records.
// Target >= 50 M records/s.
#include <benchmark/benchmark.h>
#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "import/cupti_recording_file.h"
#include "producers/cupti_recording.h"
#include "producers/cupti_records.h"

namespace liveprof {
namespace {

constexpr size_t kBufferBytes = size_t{4} << 20;

struct ActivityBuffer {
  std::vector<uint64_t> words;  // 8-byte aligned, as CUPTI's.
  size_t size = 0;
  size_t records = 0;
  std::deque<std::string> kernel_names;  // stable char* for the records.

  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words.data()); }
};

// One record's bytes (the layout is chosen later: in order, or shuffled).
using Record = std::vector<uint8_t>;
template <typename T>
Record Bytes(const T& r) {
  Record b(sizeof r);
  std::memcpy(b.data(), &r, sizeof r);
  return b;
}

// A training loop's records in CUPTI's order: each operation's API record,
// then its device record (one in five device records a little late, after
// the next operation's API record), 7 % of launches under a new framework op
// (an external correlation first).
std::vector<Record> MakeRecords(std::deque<std::string>* kernel_names) {
  std::mt19937_64 rng(7);
  char text[200];
  for (int i = 0; i < 300; ++i) {
    const int pad = 30 + i % 90;  // names of 60..150 characters.
    std::snprintf(text, sizeof text,
                  i % 3 == 0 ? "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_%d_%.*s>"
                             : "void at::native::elementwise_kernel_%d<%.*s>",
                  i, pad,
                  "128x128_32x3_nn_align4_float_float_float_ScaleType_Default_Identity4_128_"
                  "SharedMemory_Ampere_Sm80_Wgmma_Cluster1x1x1_Pingpong");
    kernel_names->emplace_back(text);
  }
  std::vector<Record> records;
  size_t bytes = 0;
  uint64_t t = 1'000'000'000;
  uint32_t corr = 1;
  Record late;
  auto add = [&](Record r) {
    bytes += r.size();
    records.push_back(std::move(r));
  };
  auto device = [&](Record r) {
    if (!late.empty()) add(std::move(late));
    late.clear();
    if (rng() % 5 == 0) {
      late = std::move(r);
    } else {
      add(std::move(r));
    }
  };
  auto api = [&](uint32_t cbid) {
    CUpti_ActivityAPI a{};
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = cbid;
    a.start = t;
    a.end = t + 3'000 + rng() % 5'000;
    a.processId = 1000;
    a.threadId = 2000 + static_cast<uint32_t>(rng() % 4);
    a.correlationId = corr;
    add(Bytes(a));
  };
  while (bytes < kBufferBytes - 1024) {
    const uint32_t op = static_cast<uint32_t>(rng() % 100);
    t += 500 + rng() % 3000;
    ++corr;
    if (op < 88) {
      if (rng() % 100 < 7) {
        CUpti_ActivityExternalCorrelation x{};
        x.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
        x.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
        x.externalId = 3 + rng() % 150;
        x.correlationId = corr;
        add(Bytes(x));
      }
      api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
      CUpti_ActivityKernel10 k{};
      k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      k.start = t + 5'000;
      k.end = k.start + 2'000 + rng() % 200'000;
      k.deviceId = static_cast<uint32_t>(rng() % 2);
      k.contextId = 1 + k.deviceId;
      k.streamId = 7 + static_cast<uint32_t>(rng() % 4);
      const uint32_t shape = static_cast<uint32_t>(rng() % 120);
      k.gridX = 1 + static_cast<int32_t>(shape * 7);
      k.gridY = 1 + static_cast<int32_t>(shape % 3);
      k.gridZ = 1;
      k.blockX = 64 << (shape % 4);
      k.blockY = 1;
      k.blockZ = 1;
      k.registersPerThread = static_cast<uint16_t>(16 + shape % 64);
      k.staticSharedMemory = static_cast<int32_t>(1024 * (shape % 8));
      k.dynamicSharedMemory = 0;
      k.correlationId = corr;
      k.name = (*kernel_names)[rng() % kernel_names->size()].c_str();
      device(Bytes(k));
    } else if (op < 93) {
      api(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020);
      CUpti_ActivityMemcpy6 m{};
      m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      m.copyKind = static_cast<uint8_t>(1 + rng() % 2);
      m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
      m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
      m.bytes = 1 << (10 + rng() % 16);
      m.start = t + 4'000;
      m.end = m.start + 10'000;
      m.deviceId = static_cast<uint32_t>(rng() % 2);
      m.streamId = 7;
      m.correlationId = corr;
      device(Bytes(m));
    } else if (op < 97) {
      api(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020);
      CUpti_ActivityMemset4 s{};
      s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
      s.bytes = 4096;
      s.start = t + 4'000;
      s.end = s.start + 1'500;
      s.deviceId = 0;
      s.streamId = 8;
      s.correlationId = corr;
      s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
      device(Bytes(s));
    } else {
      const bool alloc = rng() % 2 != 0;
      api(alloc ? CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020 : CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020);
      CUpti_ActivityMemory4 m{};
      m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
      m.memoryOperationType =
          alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
      m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
      m.address = 0x7f0000000000 + (rng() % 4096) * 4096;
      m.bytes = 1 << 20;
      m.timestamp = t + 1'000;
      m.deviceId = 0;
      m.streamId = CUPTI_INVALID_STREAM_ID;
      m.correlationId = corr;
      add(Bytes(m));
    }
  }
  return records;
}

// The records laid out in one 8-byte aligned buffer; `shuffled`: in random
// order (no run of kinds for the branch predictor: the worst case).
const ActivityBuffer& MakeBuffer(bool shuffled) {
  static ActivityBuffer* buffers[2] = {nullptr, nullptr};
  ActivityBuffer*& b = buffers[shuffled ? 1 : 0];
  if (b == nullptr) {
    b = new ActivityBuffer;
    b->words.resize(kBufferBytes / 8);
    std::vector<Record> records = MakeRecords(&b->kernel_names);
    if (shuffled) std::shuffle(records.begin(), records.end(), std::mt19937_64(11));
    for (const Record& r : records) {
      if (b->size + r.size() > kBufferBytes) break;
      std::memcpy(reinterpret_cast<uint8_t*>(b->words.data()) + b->size, r.data(), r.size());
      b->size += r.size();
      ++b->records;
    }
  }
  return *b;
}

void BM_CuptiParse(benchmark::State& state) {
  const ActivityBuffer& b = MakeBuffer(state.range(0) != 0);
  Stream stream;
  ClockMap clock;
  clock.AddPair(1'000'000'000, 50'000'000'000);
  clock.AddPair(2'000'000'000, 51'000'000'100);
  CuptiRecordParser::Options options;
  options.clock = &clock;
  CuptiRecordParser parser(stream, options);
  auto ring = SpscRing::Create(size_t{1} << 16);
  size_t events = 0;
  for (auto _ : state) {
    const auto r = parser.Parse(b.data(), b.size, *ring);
    events += r.events;
    ring->Drain([](std::span<Event> s) { benchmark::DoNotOptimize(s.data()); });
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * b.records));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * b.size));
  state.counters["records_per_buffer"] = static_cast<double>(b.records);
  state.counters["events_per_record"] =
      static_cast<double>(events) / static_cast<double>(state.iterations() * b.records);
}
BENCHMARK(BM_CuptiParse)->ArgName("shuffled")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// What a real GPU produced: the activity buffers of an unmodified PyTorch
// ResNet-18 job on an H200 (../shared/data/gpu/h200/resnet18_8steps_injected,
// 2.8 MB of records: 73 % runtime/driver API, 6 % kernels), read as a
// recording (recorded names: no pointer dereferenced), every buffer per
// iteration. items_per_second = records.
void BM_CuptiParseRecorded(benchmark::State& state) {
  static CuptiRecording* recording = [] {
    auto* r = new CuptiRecording;
    std::string error;
    const std::string path =
        std::string(LIVEPROF_SOURCE_DIR) + "/../shared/data/gpu/h200/resnet18_8steps_injected.bin.gz";
    if (!ReadCuptiRecordingFile(path, r, &error)) r->buffers.clear();
    return r;
  }();
  if (recording->buffers.empty()) {
    state.SkipWithError("../shared/data/gpu is absent");
    return;
  }
  Stream stream;
  RecordedCupti input(*recording, stream.names());
  CuptiRecordParser parser(stream, input.parser_options());
  auto ring = SpscRing::Create(size_t{1} << 17);
  size_t records = 0, bytes = 0;
  for (auto _ : state) {
    for (const CuptiRecording::Buffer& b : recording->buffers) {
      const auto r = parser.Parse(b.data(), b.size, *ring);
      records += r.records;
      bytes += b.size;
      ring->Drain([](std::span<Event> s) { benchmark::DoNotOptimize(s.data()); });
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(records));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_CuptiParseRecorded)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace liveprof
