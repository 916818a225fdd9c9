// Ring throughput and overload behaviour.
//
//   BM_RingThroughput/producers:N  N producer threads push into their own
//       rings; the real DrainLoop (pipeline thread: drain, reorder, deliver)
//       counts what it delivers. A full ring makes the producer spin, so this
//       is the sustained rate of the whole path. Target >= 60 M events/s (1).
//   BM_QueueOnly/spsc, BM_QueueOnly/moodycamel  the two candidate queues with
//       no pipeline: one producer, one consumer thread draining in bulk. The
//       figures that chose SpscRing (bench/RESULTS.md).
//   BM_Overload  a producer far faster than the drain: per-push latency
//       percentiles (p50/p99/p99.9 in ns) and the share dropped.
#include <benchmark/benchmark.h>
#include <concurrentqueue/concurrentqueue.h>
#include <x86intrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <thread>
#include <vector>

#include "stream/clock.h"
#include "stream/drain_loop.h"
#include "stream/spsc_ring.h"
#include "stream/stream.h"

namespace liveprof {
namespace {

constexpr uint64_t kEventsPerIteration = 20'000'000;

Event MakeEvent(uint64_t ts, uint32_t seq) {
  Event e;
  e.ts = ts;
  e.kind = EventKind::kInstant;
  e.corr = seq;
  e.track = 1;
  return e;
}

void BM_RingThroughput(benchmark::State& state) {
  const int producers = static_cast<int>(state.range(0));
  const uint64_t per_producer = kEventsPerIteration / producers;
  for (auto _ : state) {
    Stream stream(Stream::Options{.ring_capacity = size_t{1} << 16});
    std::atomic<uint64_t> delivered{0};
    DrainLoop::Options o;
    o.reorder.window_ns = 2'000'000;  // 2 ms: above the producers' clock refresh.
    o.idle_sleep = std::chrono::microseconds(state.range(1));
    uint64_t late = 0;
    DrainLoop loop(stream, o, [&](const Batch& b) {
      late += b.late.size();
      delivered.fetch_add(b.events.size() + b.late.size(), std::memory_order_relaxed);
    });
    std::vector<std::shared_ptr<Ring>> rings;
    for (int p = 0; p < producers; ++p) rings.push_back(stream.AddRing({.name = "bench"}));
    loop.Start();
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        SpscRing& q = *rings[p]->queue;
        uint64_t now = HostNowNs();
        for (uint64_t i = 0; i < per_producer; ++i) {
          // Real timestamps, read every 256 events to keep the clock's cost
          // out of a measurement of the path.
          if ((i & 255) == 0) now = HostNowNs();
          const Event e = MakeEvent(now, static_cast<uint32_t>(i));
          while (!q.TryPush(e)) _mm_pause();  // full: let the drain catch up.
        }
      });
    }
    for (auto& t : threads) t.join();
    while (delivered.load(std::memory_order_relaxed) < per_producer * producers) {
      std::this_thread::yield();
    }
    loop.Stop();
    uint64_t dropped = 0;
    for (auto& r : rings) dropped += r->queue->dropped();
    state.counters["full_ring_retries"] += static_cast<double>(dropped);
    state.counters["late"] += static_cast<double>(late);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * per_producer * producers));
}
BENCHMARK(BM_RingThroughput)
    ->ArgNames({"producers", "sleep_us"})
    ->Args({1, 100})
    ->Args({1, 1000})
    ->Args({2, 1000})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_QueueOnly_Spsc(benchmark::State& state) {
  for (auto _ : state) {
    auto ring = SpscRing::Create(size_t{1} << 16);
    std::atomic<bool> done{false};
    uint64_t consumed = 0, checksum = 0;
    std::thread consumer([&] {
      auto drain = [&] {
        return ring->Drain([&](std::span<Event> s) {
          for (const Event& e : s) checksum += e.corr;
          consumed += s.size();
        });
      };
      while (!done.load(std::memory_order_acquire)) {
        if (drain() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      drain();
    });
    for (uint64_t i = 0; i < kEventsPerIteration; ++i) {
      const Event e = MakeEvent(i, static_cast<uint32_t>(i));
      while (!ring->TryPush(e)) {
      }
    }
    done.store(true, std::memory_order_release);
    consumer.join();
    benchmark::DoNotOptimize(checksum);
    if (consumed != kEventsPerIteration) state.SkipWithError("events lost");
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kEventsPerIteration));
}
BENCHMARK(BM_QueueOnly_Spsc)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_QueueOnly_Moodycamel(benchmark::State& state) {
  for (auto _ : state) {
    moodycamel::ConcurrentQueue<Event> queue(size_t{1} << 16);
    std::atomic<bool> done{false};
    uint64_t consumed = 0, checksum = 0;
    std::thread consumer([&] {
      moodycamel::ConsumerToken token(queue);
      std::array<Event, 4096> buf;
      auto drain = [&] {
        size_t total = 0, n;
        while ((n = queue.try_dequeue_bulk(token, buf.data(), buf.size())) > 0) {
          for (size_t i = 0; i < n; ++i) checksum += buf[i].corr;
          total += n;
        }
        consumed += total;
        return total;
      };
      while (!done.load(std::memory_order_acquire)) {
        if (drain() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      drain();
    });
    moodycamel::ProducerToken token(queue);
    for (uint64_t i = 0; i < kEventsPerIteration; ++i) {
      const Event e = MakeEvent(i, static_cast<uint32_t>(i));
      // try_enqueue never allocates once the blocks are preallocated: a full
      // queue refuses, as our ring does.
      while (!queue.try_enqueue(token, e)) {
      }
    }
    done.store(true, std::memory_order_release);
    consumer.join();
    benchmark::DoNotOptimize(checksum);
    if (consumed != kEventsPerIteration) state.SkipWithError("events lost");
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kEventsPerIteration));
}
BENCHMARK(BM_QueueOnly_Moodycamel)->UseRealTime()->Unit(benchmark::kMillisecond);

// A producer pushing as fast as it can into a 4 Ki ring drained every 1 ms:
// most pushes are refused. Each push is timed alone with two TSC reads
// (their own cost, ~19 ns, is measured and subtracted).
void BM_Overload(benchmark::State& state) {
  constexpr uint64_t kPushes = 2'000'000;
  constexpr size_t kBuckets = 4096;  // 1-tick buckets; the last holds the rest.
  std::vector<uint64_t> hist(kBuckets);
  uint64_t dropped = 0, pushes = 0;
  // Calibrate ticks per ns and the cost of the timing itself.
  const TscPair a = ReadTscPair();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const TscPair b = ReadTscPair();
  const double ns_per_tick = static_cast<double>(b.host_ns - a.host_ns) / static_cast<double>(b.tsc - a.tsc);
  uint64_t empty_min = ~0ull;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t t0 = TscRead();
    const uint64_t t1 = TscRead();
    empty_min = std::min(empty_min, t1 - t0);
  }
  for (auto _ : state) {
    Stream stream(Stream::Options{.ring_capacity = 4096});
    DrainLoop::Options o;
    o.idle_sleep = std::chrono::microseconds(1000);
    DrainLoop loop(stream, o, [](const Batch&) {});
    auto ring = stream.AddRing({.name = "overload"});
    loop.Start();
    SpscRing& q = *ring->queue;
    uint64_t now = HostNowNs();
    for (uint64_t i = 0; i < kPushes; ++i) {
      if ((i & 255) == 0) now = HostNowNs();
      const uint64_t t0 = TscRead();
      q.TryPush(MakeEvent(now, static_cast<uint32_t>(i)));
      const uint64_t t1 = TscRead();
      const uint64_t d = t1 - t0 > empty_min ? t1 - t0 - empty_min : 0;
      ++hist[std::min<uint64_t>(d, kBuckets - 1)];
    }
    loop.Stop();
    dropped += q.dropped();
    pushes += kPushes;
  }
  auto percentile = [&](double p) {
    const uint64_t want = static_cast<uint64_t>(p * static_cast<double>(pushes));
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += hist[i];
      if (seen > want) return static_cast<double>(i) * ns_per_tick;
    }
    return static_cast<double>(kBuckets) * ns_per_tick;
  };
  state.counters["p50_ns"] = percentile(0.5);
  state.counters["p99_ns"] = percentile(0.99);
  state.counters["p99.9_ns"] = percentile(0.999);
  state.counters["dropped_share"] = static_cast<double>(dropped) / static_cast<double>(pushes);
  state.counters["dropped"] = static_cast<double>(dropped);
}
BENCHMARK(BM_Overload)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace liveprof
