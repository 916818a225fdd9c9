// The analyses on one core: every aggregator over a realistic mixed stream
// (BM_Aggregators_All, target ≥ 20 M events/s), and one render of every view
// with 10,000 distinct ops (BM_Snapshot, target ≤ 2 ms).
#include <benchmark/benchmark.h>

#include <algorithm>

#include "aggregators/analyses.h"
#include "synthetic_workload.h"

namespace liveprof {
namespace {

void FeedAll(Analyses& a, const test::Workload& w, size_t batch) {
  a.Consume(w.definitions, {}, {}, 0, 0);
  for (size_t i = 0; i < w.events.size(); i += batch) {
    const size_t n = std::min(batch, w.events.size() - i);
    const std::span<const Event> part(w.events.data() + i, n);
    a.Consume({}, part, {}, part.back().end(), part.back().end());
  }
}

void BM_Aggregators_All(benchmark::State& state) {
  test::WorkloadShape shape;
  shape.steps = 200;
  const test::Workload w = test::MakeWorkload(shape);
  AnalysesOptions options;
  options.pytorch_view = state.range(0) != 0;
  for (auto _ : state) {
    state.PauseTiming();
    Diagnostics diag;
    auto a = std::make_unique<Analyses>(options, &diag);
    state.ResumeTiming();
    FeedAll(*a, w, 4096);
    a->Flush(w.events.back().end());
    benchmark::DoNotOptimize(a->events_consumed());
    state.PauseTiming();
    a.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.events.size()));
  state.counters["events"] = static_cast<double>(w.events.size());
}
BENCHMARK(BM_Aggregators_All)->ArgName("pytorch_view")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The step path alone (assembly and breakdown), the largest part of the above.
void BM_StepPath(benchmark::State& state) {
  test::WorkloadShape shape;
  shape.steps = 200;
  const test::Workload w = test::MakeWorkload(shape);
  Catalog catalog;
  catalog.Consume(w.definitions);
  for (auto _ : state) {
    Diagnostics diag;
    StepAssembler steps(&catalog, &diag, StepAssembler::Options{});
    StepBreakdown breakdown(&diag, StepBreakdown::Options{});
    for (size_t i = 0; i < w.events.size(); i += 4096) {
      const std::span<const Event> part(w.events.data() + i, std::min<size_t>(4096, w.events.size() - i));
      steps.Consume(part);
      steps.Advance(part.back().end());
      std::vector<StepRecord> closed = steps.TakeClosed();
      breakdown.Consume(closed);
      steps.Recycle(std::move(closed));
    }
    steps.Flush();
    breakdown.Consume(steps.TakeClosed());
    benchmark::DoNotOptimize(breakdown.steps_total());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.events.size()));
}
BENCHMARK(BM_StepPath)->Unit(benchmark::kMillisecond);

void BM_Snapshot(benchmark::State& state) {
  test::WorkloadShape shape;
  shape.steps = 100;
  shape.ops_per_step = 100;
  shape.kernels_per_op = 1;
  shape.distinct_ops = 10'000;      // every op name distinct...
  shape.distinct_kernels = 10'000;  // ...and every kernel.
  const test::Workload w = test::MakeWorkload(shape);
  Diagnostics diag;
  AnalysesOptions options;
  Analyses a(options, &diag);
  FeedAll(a, w, 4096);
  a.Flush(w.events.back().end());
  size_t bytes = 0;
  for (auto _ : state) {
    RenderedViews v = a.Render(RenderOptions{});
    bytes = v.overview.size() + v.steps.size() + v.input_pipeline.size() + v.tf_stats.size() + v.kernel_stats.size() +
            v.memory.size() + v.alerts.size() + v.status.size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["json_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Snapshot)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace liveprof
