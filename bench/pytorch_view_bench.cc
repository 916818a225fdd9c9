// PytorchView: the PyTorch plugin's overview.
//
//   BM_PytorchViewConsume  Consume() over a realistic training stream (per
//       step: a ProfilerStep, a DataLoader __next__ with nested ops, ~100
//       operators each with a launch and its kernel, a memcpy, a memset), in
//       completion order, in 4096-event batches. Items = events offered.
//       The default buffer (4 M events) compacts a few times per iteration.
//   BM_PytorchOverviewCompute/N  ComputePytorchOverview() (what Snapshot()
//       runs) over N buffered events. Items = events.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/pytorch/pytorch_view.h"
#include "event_builder.h"

namespace liveprof {
namespace {

enum : NameId { kStep = 1, kNext, kMm, kAdd, kLaunch, kGemm, kMemcpyName, kLastName };

Catalog MakeCatalog(int steps) {
  Catalog c;
  for (int i = 0; i < steps; ++i) c.DefineName(kLastName + i, "ProfilerStep#" + std::to_string(i));
  c.DefineName(kNext, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  c.DefineName(kMm, "aten::mm");
  c.DefineName(kAdd, "aten::add");
  c.DefineName(kLaunch, "cudaLaunchKernel");
  c.DefineName(kGemm, "volta_sgemm_128x64_nn");
  c.DefineName(kMemcpyName, "cudaMemcpyAsync");
  return c;
}

// About 420 events per step, in completion order.
std::vector<Event> MakeStream(int steps) {
  std::vector<Event> ev;
  uint32_t corr = 1;
  constexpr uint64_t kStepNs = 2'000'000;
  for (int s = 0; s < steps; ++s) {
    const uint64_t t0 = 1'000'000'000ull + kStepNs * static_cast<uint64_t>(s);
    ev.push_back(test::Op(t0, kStepNs - 1000, kLastName + s));
    ev.push_back(test::Op(t0 + 1000, 300'000, kNext));
    for (int k = 0; k < 20; ++k) ev.push_back(test::Op(t0 + 2000 + 10'000 * k, 5000, kAdd));
    ev.push_back(test::Launch(t0 + 310'000, 5000, corr, kMemcpyName));
    ev.push_back(test::Copy(EventKind::kMemcpyHtoD, t0 + 312'000, 40'000, 1 << 20, corr++));
    ev.push_back(test::Copy(EventKind::kMemset, t0 + 360'000, 2000, 1 << 10, corr++));
    for (int k = 0; k < 100; ++k) {
      const uint64_t t = t0 + 400'000 + 14'000 * static_cast<uint64_t>(k);
      ev.push_back(test::Op(t, 10'000, kMm));
      ev.push_back(test::Op(t + 1000, 4000, kAdd));
      ev.push_back(test::Launch(t + 2000, 3000, corr, kLaunch));
      ev.push_back(test::Kernel(t + 6000, 12'000, kGemm, corr++, 100, kMm));
    }
  }
  std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
  return ev;
}

void BM_PytorchViewConsume(benchmark::State& state) {
  constexpr int kSteps = 2000;  // ~850 k events.
  const Catalog catalog = MakeCatalog(kSteps);
  const std::vector<Event> events = MakeStream(kSteps);
  PytorchViewOptions options;
  options.max_events = 200'000;  // compacts several times per pass.
  for (auto _ : state) {
    state.PauseTiming();
    PytorchView view(&catalog, nullptr, options);
    state.ResumeTiming();
    for (size_t i = 0; i < events.size(); i += 4096) {
      view.Consume(std::span<const Event>(events).subspan(i, std::min<size_t>(4096, events.size() - i)));
    }
    benchmark::DoNotOptimize(view.buffered().size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(events.size()));
}
BENCHMARK(BM_PytorchViewConsume)->Unit(benchmark::kMillisecond);

void BM_PytorchOverviewCompute(benchmark::State& state) {
  const int steps = static_cast<int>(state.range(0) / 420);
  const Catalog catalog = MakeCatalog(steps);
  const std::vector<Event> events = MakeStream(steps);
  for (auto _ : state) {
    PytorchOverview o = ComputePytorchOverview(events, catalog);
    benchmark::DoNotOptimize(o.steps.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(events.size()));
}
BENCHMARK(BM_PytorchOverviewCompute)->Arg(100'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace liveprof
