// The record path of the host tracing API, with the drain loop running on
// the other core as it does in a real run ("drained concurrently").
//
// Targets: BM_RecordInstant median <= 12 ns, BM_RecordScope
// median <= 22 ns, BM_RecordScopeDisabled <= 1 ns. Run with
//   build/bin/liveprof_bench --benchmark_filter=BM_Record
//     --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <atomic>
#include <memory>

#include "producers/host_api.h"
#include "stream/drain_loop.h"

namespace liveprof {
namespace {

// The global stream with big rings, drained by a real DrainLoop whose
// consumer only counts. Set up once for the whole binary.
struct Pipeline {
  std::atomic<uint64_t> delivered{0};
  std::unique_ptr<DrainLoop> loop;

  Pipeline() {
    ConfigureGlobalStream(Stream::Options{.ring_capacity = size_t{1} << 20});
    DrainLoop::Options o;
    o.reorder.window_ns = 1'000'000;
    o.idle_sleep = std::chrono::microseconds(100);
    loop = std::make_unique<DrainLoop>(
        GlobalStream(), o, [this](const Batch& b) { delivered.fetch_add(b.events.size(), std::memory_order_relaxed); });
    loop->Start();
  }
};

Pipeline& GetPipeline() {
  static Pipeline* p = new Pipeline();  // lives until exit, like the profiled program's.
  return *p;
}

void ReportDrops(benchmark::State& state, uint64_t dropped_before) {
  state.counters["dropped"] = static_cast<double>(GlobalStream().TotalDropped() - dropped_before);
}

void BM_RecordInstant(benchmark::State& state) {
  GetPipeline();
  SetTracingEnabled(true);
  const NameId name = InternName("bench/instant");
  const uint64_t dropped = GlobalStream().TotalDropped();
  for (auto _ : state) RecordInstant(name);
  ReportDrops(state, dropped);
}
BENCHMARK(BM_RecordInstant);

void BM_RecordScope(benchmark::State& state) {
  GetPipeline();
  SetTracingEnabled(true);
  const NameId name = InternName("bench/scope");
  const uint64_t dropped = GlobalStream().TotalDropped();
  for (auto _ : state) {
    Scope scope(name);
  }
  ReportDrops(state, dropped);
}
BENCHMARK(BM_RecordScope);

// The macro form: adds the call site's cached name id.
void BM_RecordScopeMacro(benchmark::State& state) {
  GetPipeline();
  SetTracingEnabled(true);
  const uint64_t dropped = GlobalStream().TotalDropped();
  for (auto _ : state) {
    LIVEPROF_SCOPE("bench/macro");
  }
  ReportDrops(state, dropped);
}
BENCHMARK(BM_RecordScopeMacro);

void BM_RecordScopeDisabled(benchmark::State& state) {
  GetPipeline();
  SetTracingEnabled(false);
  const NameId name = InternName("bench/disabled");
  for (auto _ : state) {
    Scope scope(name);
    benchmark::ClobberMemory();
  }
  SetTracingEnabled(true);
}
BENCHMARK(BM_RecordScopeDisabled);

// Capture on demand's levels, on the host side of one simulated
// model step (simulated_model.h: 48 framework ops, 3 launches each, an input
// span, the step): each launch does ~2 us of work, as a cudaLaunchKernel
// costs. Arg: 0 tracing off, 1 the critical level (steps, input), 2 the
// detailed level (+ ops, runtime calls). The overhead of a level is its time
// over Arg 0's.
void SpinWork(int iterations) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < iterations; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    benchmark::DoNotOptimize(x);
  }
}

void BM_SimulatedStepHostLevel(benchmark::State& state) {
  GetPipeline();
  const int level = static_cast<int>(state.range(0));
  SetTracingEnabled(level != 0);
  SetHostTraceLevel(level == 0 ? kHostLevelDetailed : level);
  const NameId step = InternName("bench/train"), input = InternName("bench/IteratorGetNext");
  const NameId op = InternName("bench/op"), launch = InternName("bench/cudaLaunchKernel");
  const uint64_t dropped = GlobalStream().TotalDropped();
  int64_t n = 0;
  for (auto _ : state) {
    StepScope s(n++, step);
    {
      Scope in(input, EventKind::kInputSpan);
      SpinWork(2000);
    }
    for (int o = 0; o < 48; ++o) {
      Scope fop(op, EventKind::kFrameworkOp);
      for (int k = 0; k < 3; ++k) {
        Scope api(launch, EventKind::kRuntimeApi);
        SpinWork(2000);
      }
    }
  }
  state.counters["events_per_step"] = level == 0 ? 0 : level == 1 ? 2 : 2 + 48 * 4;
  ReportDrops(state, dropped);
  SetTracingEnabled(true);
  SetHostTraceLevel(kHostLevelDetailed);
}
BENCHMARK(BM_SimulatedStepHostLevel)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace liveprof
