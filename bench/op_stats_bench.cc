// OpStats (TF stats table) throughput.
//
//   BM_OpStatsConsume  steady-state Consume() over a realistic synthetic stream:
//       ~70 % kernels (90 % attributed to a framework op), ~25 % host
//       framework ops nested 1-4 deep on 4 threads (some input spans), ~5 %
//       copies / memsets, 2,000 distinct op names, 2 GPUs x 4 streams, in
//       completion order, fed in 4,096-event chunks. Each pass shifts the
//       stream forward in time (outside the timed region) so buckets rotate
//       as in a live run. Target >= 40 M events/s.
//   BM_OpStatsSnapshot  one Snapshot() (since start, with IDLE, top 500) after
//       many passes: the per-tick cost of the table.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/tf/op_stats.h"
#include "event_builder.h"
#include "stream/diagnostics.h"

namespace liveprof {
namespace {

constexpr NameId kOpNames = 2000;  // ids 1..2000.
constexpr NameId kFirstKernel = kOpNames + 1;
constexpr NameId kKernelNames = 300;
constexpr NameId kFirstInput = kFirstKernel + kKernelNames;
constexpr NameId kInputNames = 8;
constexpr size_t kStreamEvents = size_t{1} << 20;
constexpr size_t kChunk = 4096;

struct Workload {
  Catalog catalog;
  std::vector<Event> events;
  uint64_t span_ns = 0;  // end of the last event + a gap: the shift per pass.
};

struct Generator {
  std::mt19937 rng{42};
  std::vector<Event>* out;
  uint64_t stream_free[2][4] = {};  // when each GPU stream is next free.

  uint64_t Rand(uint64_t lo, uint64_t hi) { return lo + rng() % (hi - lo + 1); }

  // Device work launched by a host op at `t`: ~2.8 kernels and ~0.2 copies.
  void Launch(uint64_t t, NameId root) {
    const int kernels = static_cast<int>(Rand(1, 5)) - (rng() % 5 == 0 ? 1 : 0);
    for (int k = 0; k <= kernels; ++k) {
      const uint8_t device = static_cast<uint8_t>(rng() % 2);
      const int stream = static_cast<int>(rng() % 4);
      uint64_t& free = stream_free[device][stream];
      const uint64_t begin = std::max(free, t + Rand(2'000, 8'000));
      if (k == kernels && rng() % 5 == 0) {
        const auto kind =
            rng() % 4 == 0
                ? EventKind::kMemset
                : static_cast<EventKind>(static_cast<int>(EventKind::kMemcpyHtoD) + static_cast<int>(rng() % 3));
        const uint64_t dur = Rand(1'000, 20'000);
        out->push_back(test::Copy(kind, begin, dur, 1 << 20, 0, 100 + stream, device));
        free = begin + dur;
        continue;
      }
      if (k == kernels) continue;
      const uint64_t dur = Rand(2'000, 40'000);
      // An op launches its own few kernels; a third of the kernel names
      // (gemm-like) are shared by many ops.
      const NameId kernel =
          kFirstKernel + (k % 3 == 0 ? static_cast<NameId>(root % 20)
                                     : static_cast<NameId>((root * 7 + static_cast<NameId>(k)) % kKernelNames));
      const NameId op = rng() % 10 == 0 ? 0 : root;
      out->push_back(test::Kernel(begin, dur, kernel, 0, 100 + stream, op, 0, device));
      free = begin + dur;
    }
  }

  // One op [b, e) with nested children down to `depth`; returns nothing, emits
  // children first is not needed: the stream is sorted afterwards.
  void HostOp(TrackId track, uint64_t b, uint64_t e, int depth, NameId root) {
    const NameId name = 1 + static_cast<NameId>(rng() % kOpNames);
    if (depth > 0 && rng() % 12 == 0) {
      Event in = test::Input(b, e - b, kFirstInput + rng() % kInputNames, track);
      in.sub = static_cast<uint8_t>(1 + rng() % 4);
      out->push_back(in);
    } else {
      out->push_back(test::Op(b, e - b, name, track));
    }
    if (root == 0) root = name;
    Launch(b, root);
    if (depth == 0 || e - b < 400) return;
    const int children = static_cast<int>(Rand(1, 2));
    const uint64_t slot = (e - b) / static_cast<uint64_t>(children);
    for (int c = 0; c < children; ++c) {
      const uint64_t cb = b + static_cast<uint64_t>(c) * slot + slot / 10;
      const uint64_t ce = cb + slot * 7 / 10;
      HostOp(track, cb, ce, depth - 1, root);
    }
  }
};

const Workload& GetWorkload() {
  static const Workload* w = [] {
    auto* w = new Workload;
    for (NameId i = 1; i <= kOpNames; ++i) {
      w->catalog.DefineName(i, "model/block" + std::to_string(i % 40) + "/layer" + std::to_string(i) + "/Op" +
                                   std::to_string(i % 50) + ":Op" + std::to_string(i % 50));
    }
    for (NameId k = 0; k < kKernelNames; ++k) {
      w->catalog.DefineName(kFirstKernel + k, "volta_kernel_" + std::to_string(k));
    }
    for (NameId k = 0; k < kInputNames; ++k) {
      w->catalog.DefineName(kFirstInput + k, "Iterator::Prefetch::Map" + std::to_string(k));
    }
    Generator g;
    g.out = &w->events;
    w->events.reserve(kStreamEvents + 1024);
    uint64_t thread_t[4] = {0, 3'000, 6'000, 9'000};
    while (w->events.size() < kStreamEvents) {
      const TrackId track = static_cast<TrackId>(g.rng() % 4);
      const int depth = static_cast<int>(g.Rand(0, 3));  // 1-4 levels.
      const uint64_t len = g.Rand(20'000, 120'000) * static_cast<uint64_t>(depth + 1);
      const uint64_t b = thread_t[track] + g.Rand(1'000, 10'000);
      g.HostOp(1 + track, b, b + len, depth, 0);
      thread_t[track] = b + len;
    }
    std::stable_sort(w->events.begin(), w->events.end(), [](const Event& a, const Event& b) {
      if (a.end() != b.end()) return a.end() < b.end();
      return a.ts > b.ts;
    });
    w->span_ns = w->events.back().end() + 1'000'000;
    return w;
  }();
  return *w;
}

void ShiftForward(std::vector<Event>* events, uint64_t by) {
  for (Event& e : *events) e.ts += by;
}

void BM_OpStatsConsume(benchmark::State& state) {
  const Workload& w = GetWorkload();
  std::vector<Event> events = w.events;
  Diagnostics diag;
  OpStats stats(&w.catalog, &diag);
  // One untimed pass: steady state (tables sized, device ops known).
  stats.Consume(events);
  for (auto _ : state) {
    state.PauseTiming();
    ShiftForward(&events, w.span_ns);
    state.ResumeTiming();
    for (size_t i = 0; i < events.size(); i += kChunk) {
      stats.Consume(std::span<const Event>(events).subspan(i, std::min(kChunk, events.size() - i)));
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(events.size()));
  size_t kernels = 0, host = 0, copies = 0;
  for (const Event& e : events) {
    if (e.kind == EventKind::kKernel) ++kernels;
    else if (IsDeviceKind(e.kind)) ++copies;
    else ++host;
  }
  state.counters["kernel_share"] = static_cast<double>(kernels) / static_cast<double>(events.size());
  state.counters["host_share"] = static_cast<double>(host) / static_cast<double>(events.size());
  state.counters["copy_share"] = static_cast<double>(copies) / static_cast<double>(events.size());
  state.counters["sim_s_per_pass"] = static_cast<double>(w.span_ns) / 1e9;
  state.counters["misnested"] = static_cast<double>(diag.Get(Diag::span_misnested));
}
BENCHMARK(BM_OpStatsConsume)->Unit(benchmark::kMillisecond);

void BM_OpStatsSnapshot(benchmark::State& state) {
  const Workload& w = GetWorkload();
  std::vector<Event> events = w.events;
  Diagnostics diag;
  OpStats stats(&w.catalog, &diag);
  for (int pass = 0; pass < 8; ++pass) {
    stats.Consume(events);
    ShiftForward(&events, w.span_ns);
  }
  size_t rows = 0;
  for (auto _ : state) {
    const OpStatsSnapshot s = stats.Snapshot();
    rows = s.device.rows.size() + s.host.rows.size();
    benchmark::DoNotOptimize(rows);
  }
  state.counters["rows"] = static_cast<double>(rows);
}
BENCHMARK(BM_OpStatsSnapshot)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace liveprof
