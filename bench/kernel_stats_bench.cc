// GPU kernel stats and device utilization throughput.
//
//   BM_KernelStatsConsume  an all-kernel stream: 300 kernel names, 500
//       distinct (kernel, details, op) triples, durations spread per triple
//       around 2 µs .. 2 ms, ends ascending over ~5 s (1 s buckets rotate),
//       consumed in 4096-event batches. Target >= 60 M events/s.
//   BM_DeviceUtilizationConsume  a mixed device stream: 2 GPUs x 4 streams,
//       70 % kernels, 20 % copies, 10 % memsets, overlapping across streams,
//       in end order; every 8th batch carries a few host events (skipped).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/steps/device_utilization.h"
#include "aggregators/tf/kernel_stats.h"
#include "stream/diagnostics.h"

namespace liveprof {
namespace {

constexpr size_t kEvents = size_t{1} << 20;
constexpr size_t kBatch = 4096;

struct KernelStream {
  Catalog catalog;
  std::vector<Event> events;
};

const KernelStream& MakeKernelStream() {
  static const KernelStream* stream = [] {
    auto* s = new KernelStream;
    std::mt19937_64 rng(42);
    NameId id = 1;
    constexpr int kNames = 300, kTriples = 500, kDetails = 120, kOps = 150;
    std::vector<NameId> names, details, ops;
    char buf[160];
    for (int i = 0; i < kNames; ++i) {
      std::snprintf(buf, sizeof(buf), i % 10 == 0 ? "volta_h884gemm_%dx128_nn" : "kernel_%d_fwd", i);
      s->catalog.DefineName(id, buf);
      names.push_back(id++);
    }
    for (int i = 0; i < kDetails; ++i) {
      std::snprintf(buf, sizeof(buf), "regs:%d static_shared:%d dynamic_shared:0 grid:%d,1,1 block:%d,1,1 occ_pct:%d",
                    16 + i % 64, 1024 * (i % 8), 1 + i * 7, 64 << (i % 4), 25 + i % 75);
      s->catalog.DefineName(id, buf);
      details.push_back(id++);
    }
    for (int i = 0; i < kOps; ++i) {
      std::snprintf(buf, sizeof(buf), i % 5 == 0 ? "model/layer_%d/MatMul" : "model/layer_%d/op", i);
      s->catalog.DefineName(id, buf);
      ops.push_back(id++);
    }
    struct Triple {
      NameId kernel, details, op;
      uint64_t base_ns;
    };
    std::vector<Triple> triples;
    for (int i = 0; i < kTriples; ++i) {
      // Every name at least once, the rest random.
      const NameId k = i < kNames ? names[i] : names[rng() % kNames];
      const uint64_t base = 2000ull << (rng() % 11);  // 2 µs .. 2 ms.
      const NameId op = rng() % 8 == 0 ? 0 : ops[rng() % kOps];
      triples.push_back({k, details[rng() % kDetails], op, base});
    }
    uint64_t end = 1'000'000'000;
    s->events.reserve(kEvents);
    for (size_t i = 0; i < kEvents; ++i) {
      const Triple& t = triples[rng() % kTriples];
      end += 1 + rng() % 10'000;  // ~5 µs between kernel ends.
      const uint64_t dur = t.base_ns - t.base_ns / 5 + rng() % (t.base_ns / 5 * 2 + 1);
      Event e;
      e.kind = EventKind::kKernel;
      e.ts = end - dur;
      e.dur = dur;
      e.name = t.kernel;
      e.track = 100 + static_cast<TrackId>(rng() % 4);
      e.payload.kernel.details = t.details;
      e.payload.kernel.op = t.op;
      s->events.push_back(e);
    }
    return s;
  }();
  return *stream;
}

void BM_KernelStatsConsume(benchmark::State& state) {
  const KernelStream& s = MakeKernelStream();
  Diagnostics diag;
  for (auto _ : state) {
    KernelStats stats(&s.catalog, &diag);
    for (size_t pos = 0; pos < s.events.size(); pos += kBatch) {
      stats.Consume(std::span(s.events).subspan(pos, std::min(kBatch, s.events.size() - pos)));
    }
    benchmark::DoNotOptimize(stats);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * s.events.size()));
  // One snapshot of the result, for a sense of its cost.
  KernelStats stats(&s.catalog, &diag);
  stats.Consume(s.events);
  const auto snap = stats.Snapshot();
  state.counters["rows"] = static_cast<double>(snap.distinct_rows);
}
BENCHMARK(BM_KernelStatsConsume)->Unit(benchmark::kMillisecond);

void BM_KernelStatsSnapshot(benchmark::State& state) {
  const KernelStream& s = MakeKernelStream();
  KernelStats stats(&s.catalog, nullptr);
  stats.Consume(s.events);
  for (auto _ : state) {
    benchmark::DoNotOptimize(stats.Snapshot());
  }
}
BENCHMARK(BM_KernelStatsSnapshot)->Unit(benchmark::kMicrosecond);

const std::vector<Event>& MakeDeviceStream() {
  static const std::vector<Event>* events = [] {
    auto* v = new std::vector<Event>;
    std::mt19937_64 rng(7);
    v->reserve(kEvents + kEvents / 64);
    constexpr int kStreams = 8;  // 2 devices x 4 streams.
    std::vector<uint64_t> stream_time(kStreams, 1'000'000'000);
    for (size_t i = 0; i < kEvents; ++i) {
      const int st = static_cast<int>(rng() % kStreams);
      stream_time[st] += rng() % 4000;  // idle gap on that stream.
      const uint64_t r = rng() % 10;
      Event e;
      e.kind = r < 7   ? EventKind::kKernel
               : r < 8 ? EventKind::kMemcpyHtoD
               : r < 9 ? EventKind::kMemcpyDtoH
                       : EventKind::kMemset;
      e.dur = 500 + rng() % 20'000;
      e.ts = stream_time[st];
      stream_time[st] += e.dur;
      e.device = static_cast<uint8_t>(st / 4);
      e.track = 100 + static_cast<TrackId>(st);
      e.name = 1;
      v->push_back(e);
      if (i % 64 == 0) {  // a host op now and then.
        Event h;
        h.kind = EventKind::kFrameworkOp;
        h.ts = e.ts;
        h.dur = 10;
        v->push_back(h);
      }
    }
    std::stable_sort(v->begin(), v->end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
    return v;
  }();
  return *events;
}

void BM_DeviceUtilizationConsume(benchmark::State& state) {
  const std::vector<Event>& events = MakeDeviceStream();
  for (auto _ : state) {
    DeviceUtilization util(nullptr, nullptr);
    for (size_t pos = 0; pos < events.size(); pos += kBatch) {
      util.Consume(std::span(events).subspan(pos, std::min(kBatch, events.size() - pos)));
    }
    benchmark::DoNotOptimize(util);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events.size()));
}
BENCHMARK(BM_DeviceUtilizationConsume)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace liveprof
