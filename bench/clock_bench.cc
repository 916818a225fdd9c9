// The cost of one host-clock read: the numbers behind clock.h's choice of a
// raw TSC read on the record path (mapped to CLOCK_MONOTONIC by the drain).
#include <benchmark/benchmark.h>

#include <chrono>

#include "stream/clock.h"

namespace liveprof {
namespace {

void BM_ClockTsc(benchmark::State& state) {
  uint64_t sink = 0;
  for (auto _ : state) sink += TscRead();
  benchmark::DoNotOptimize(sink);
}
BENCHMARK(BM_ClockTsc);

void BM_ClockMonotonic(benchmark::State& state) {
  uint64_t sink = 0;
  for (auto _ : state) sink += HostNowNs();
  benchmark::DoNotOptimize(sink);
}
BENCHMARK(BM_ClockMonotonic);

void BM_ClockSteadyClock(benchmark::State& state) {
  int64_t sink = 0;
  for (auto _ : state) sink += std::chrono::steady_clock::now().time_since_epoch().count();
  benchmark::DoNotOptimize(sink);
}
BENCHMARK(BM_ClockSteadyClock);

// The drain side: mapping one tick reading onto the host clock.
void BM_ClockMapToHost(benchmark::State& state) {
  ClockMap map;
  map.AddPair(1'000, 5'000);
  map.AddPair(2'001'000, 1'005'000);
  uint64_t x = 3'000'000, sink = 0;
  for (auto _ : state) {
    sink += map.ToHost(x);
    x += 7;
  }
  benchmark::DoNotOptimize(sink);
}
BENCHMARK(BM_ClockMapToHost);

}  // namespace
}  // namespace liveprof
