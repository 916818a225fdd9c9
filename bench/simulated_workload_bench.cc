// The simulated workload's event rate (10 k to 5 M events/s): a
// paced run of one second at the asked rate, drained by a real DrainLoop.
// `events_per_second` is what the producers wrote into the rings over that
// second (read before stopping), `received` what the drain loop delivered in
// all, `dropped` what the rings lost.
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
  uint64_t written = 0, received = 0, dropped = 0;
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
    written += stream.TotalPublished();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    w.Stop();
    drain.Stop();
    received += events.load();
    dropped += stream.TotalDropped();
  }
  state.counters["events_per_second"] = static_cast<double>(written) / seconds;
  state.counters["received"] = static_cast<double>(received);
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
