// MemoryState throughput: an alloc/free stream over ~10,000 live allocations
// (a caching allocator's steady state: tensor-sized blocks, 1 µs apart), and
// the cost of a snapshot of that state.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/tf/memory_state.h"
#include "event_builder.h"
#include "stream/diagnostics.h"

namespace liveprof {
namespace {

constexpr NameId kAllocator = 1;
constexpr uint64_t kLive = 10'000;
constexpr uint64_t kSlots = 2 * kLive;
constexpr uint64_t kSlotBytes = uint64_t{2} << 20;  // slot stride: 2 MiB.
constexpr uint64_t kBase = uint64_t{0x7f00} << 32;
constexpr uint64_t kStepNs = 1000;  // one memory event per µs of event time.
constexpr size_t kPairs = 250'000;  // free + alloc pairs per direction of a cycle.
constexpr size_t kBatch = 4096;     // events per Consume, as the pipeline hands them.

struct Stream {
  std::vector<Event> warm;   // the first 10,000 allocations.
  std::vector<Event> cycle;  // forward churn, then its reverse: live set restored.
  uint64_t span_ns = 0;
};

uint64_t TensorBytes(std::mt19937_64& rng) {
  // Sizes a caching allocator rounds to: multiples of 512 B up to ~1 MiB,
  // a few hundred distinct values, small ones most frequent.
  const uint64_t units = 1 + (rng() % 64) * (1 + rng() % 32);
  return units * 512;
}

Stream MakeStream() {
  std::mt19937_64 rng(42);
  Stream s;
  std::vector<uint64_t> bytes(kSlots, 0);
  std::vector<uint64_t> live, free;
  uint64_t ts = 0;
  for (uint64_t slot = 0; slot < kSlots; ++slot) {
    if (slot % 2 == 0) {
      bytes[slot] = TensorBytes(rng);
      s.warm.push_back(test::Alloc(ts += kStepNs, kAllocator, kBase + slot * kSlotBytes, bytes[slot]));
      live.push_back(slot);
    } else {
      free.push_back(slot);
    }
  }
  struct Step {
    uint64_t freed, freed_bytes, allocated;
  };
  std::vector<Step> steps;
  for (size_t i = 0; i < kPairs; ++i) {
    const size_t li = rng() % live.size();
    const size_t fi = rng() % free.size();
    const uint64_t a = live[li];
    const uint64_t b = free[fi];
    steps.push_back({a, bytes[a], b});
    s.cycle.push_back(test::Free(ts += kStepNs, kAllocator, kBase + a * kSlotBytes));
    bytes[b] = TensorBytes(rng);
    s.cycle.push_back(test::Alloc(ts += kStepNs, kAllocator, kBase + b * kSlotBytes, bytes[b]));
    live[li] = b;
    free[fi] = a;
  }
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    s.cycle.push_back(test::Free(ts += kStepNs, kAllocator, kBase + it->allocated * kSlotBytes));
    s.cycle.push_back(test::Alloc(ts += kStepNs, kAllocator, kBase + it->freed * kSlotBytes, it->freed_bytes));
  }
  s.span_ns = ts;
  return s;
}

void ConsumeBatched(MemoryState& state, std::span<const Event> events) {
  for (size_t pos = 0; pos < events.size(); pos += kBatch) {
    state.Consume(events.subspan(pos, std::min(kBatch, events.size() - pos)));
  }
}

void BM_MemoryStateConsume(benchmark::State& state) {
  Catalog catalog;
  catalog.DefineName(kAllocator, "cuda_caching");
  Diagnostics diag;
  MemoryState memory(&catalog, &diag);
  Stream s = MakeStream();
  memory.Consume(s.warm);
  for (auto _ : state) {
    state.PauseTiming();
    for (Event& e : s.cycle) e.ts += s.span_ns;  // time moves on each cycle.
    state.ResumeTiming();
    ConsumeBatched(memory, s.cycle);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * s.cycle.size()));
  if (diag.Get(Diag::free_unknown_address) != 0 || diag.Get(Diag::alloc_address_reused) != 0) {
    state.SkipWithError("the stream is not balanced");
  }
  const auto snap = memory.Snapshot();
  state.counters["live"] = static_cast<double>(snap.memories.at(0).live_allocations);
}
BENCHMARK(BM_MemoryStateConsume)->Unit(benchmark::kMillisecond);

// Worst case for the peak path: every alloc is a new peak (each pair frees a
// block and allocates one 512 B larger), so the peak histogram replays its
// delta log on every alloc and fragmentation is recomputed every 100 ms of
// event time (every 50,000 pairs here).
void BM_MemoryStateConsumeRising(benchmark::State& state) {
  Catalog catalog;
  catalog.DefineName(kAllocator, "cuda_caching");
  const Stream s = MakeStream();
  std::mt19937_64 rng(7);
  std::vector<Event> rising;
  {
    std::vector<uint64_t> bytes(kSlots, 0), live, free;
    for (const Event& e : s.warm) {
      const uint64_t slot = (e.payload.memory.address - kBase) / kSlotBytes;
      bytes[slot] = e.payload.memory.bytes;
      live.push_back(slot);
    }
    for (uint64_t slot = 1; slot < kSlots; slot += 2) free.push_back(slot);
    uint64_t ts = s.warm.back().ts;
    for (size_t i = 0; i < kPairs; ++i) {
      const size_t li = rng() % live.size();
      const size_t fi = rng() % free.size();
      const uint64_t a = live[li], b = free[fi];
      rising.push_back(test::Free(ts += kStepNs, kAllocator, kBase + a * kSlotBytes));
      bytes[b] = bytes[a] + 512;
      rising.push_back(test::Alloc(ts += kStepNs, kAllocator, kBase + b * kSlotBytes, bytes[b]));
      live[li] = b;
      free[fi] = a;
    }
  }
  for (auto _ : state) {
    state.PauseTiming();
    auto memory = std::make_unique<MemoryState>(&catalog);
    memory->Consume(s.warm);
    state.ResumeTiming();
    ConsumeBatched(*memory, rising);
    state.PauseTiming();
    memory.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * rising.size()));
}
BENCHMARK(BM_MemoryStateConsumeRising)->Unit(benchmark::kMillisecond);

// One snapshot with ~10,000 live allocations (fragmentation sorts them).
void BM_MemoryStateSnapshot(benchmark::State& state) {
  Catalog catalog;
  catalog.DefineName(kAllocator, "cuda_caching");
  MemoryState memory(&catalog);
  const Stream s = MakeStream();
  memory.Consume(s.warm);
  ConsumeBatched(memory, s.cycle);
  for (auto _ : state) benchmark::DoNotOptimize(memory.Snapshot());
}
BENCHMARK(BM_MemoryStateSnapshot)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace liveprof
