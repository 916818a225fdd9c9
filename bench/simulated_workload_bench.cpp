// The simulated workload's event rate (issue #4: 10 k to 5 M events/s): a
// paced run of one second at the asked rate, drained by a real DrainLoop;
// items_per_second is the rate the drain loop received, `dropped` what the
// rings lost.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "producers/simulated_workload.h"
#include "stream/drain_loop.h"

namespace liveprof {
namespace {

void BM_SimulatedWorkloadRate(benchmark::State& state) {
  const double rate = static_cast<double>(state.range(0));
  uint64_t received = 0, dropped = 0;
  double seconds = 0;
  for (auto _ : state) {
    Stream::Options so;
    so.ring_capacity = size_t{1} << 20;
    Stream stream(so);
    std::atomic<uint64_t> events{0};
    DrainLoop drain(stream, DrainLoop::Options{}, [&](const Batch& b) {
      events.fetch_add(b.events.size() + b.late.size(), std::memory_order_relaxed);
    });
    SimulatedWorkloadOptions o;
    o.events_per_second = rate;
    o.model.schedule = DefaultSchedule();
    SimulatedWorkload w(stream, o);
    drain.Start();
    const auto t0 = std::chrono::steady_clock::now();
    w.Start();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    w.Stop();
    drain.Stop();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    received += events.load();
    dropped += stream.TotalDropped();
  }
  state.counters["events_per_second"] = static_cast<double>(received) / seconds;
  state.counters["asked_per_second"] = rate;
  state.counters["dropped"] = static_cast<double>(dropped);
}
BENCHMARK(BM_SimulatedWorkloadRate)
    ->ArgName("rate")
    ->Arg(10'000)
    ->Arg(1'000'000)
    ->Arg(5'000'000)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace liveprof
