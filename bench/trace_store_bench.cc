// The trace store: BM_TraceStoreAppend (target >= 20 M events/s),
// resident bytes per event with the index (target <= 20 at 100 M events) and
// BM_ViewportQuery's p95 at 2,000 px for the full range, a middle and a deep
// zoom (target <= 10 ms at 100 M events).
//
// The trace: the simulated shape of a training step, repeated: 8 GPU
// streams of back-to-back kernels (2-60 us) and 4 host threads of nested
// spans (ops over launches), in completion order, in batches of 4,096 as the
// pipeline appends them. The store size is LIVEPROF_BENCH_STORE_EVENTS
// (default 10 M; 100 M for the figure: about 3 minutes and 2 GB).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "store/trace_store.h"

namespace liveprof {
namespace {

// Fills `out` with the next batch of the synthetic trace (completion order).
class TraceGen {
 public:
  explicit TraceGen(uint64_t seed) : rng_(seed) {}
  void Next(std::vector<Event>* out, size_t n) {
    out->clear();
    while (out->size() < n) {
      // One "op": a host span over a launch, then its kernel on one stream.
      const TrackId host = static_cast<TrackId>(1 + (op_ % 4));
      const TrackId stream = static_cast<TrackId>(5 + (op_ % 8));
      const uint64_t launch_len = 2'000 + rng_() % 3'000;
      Event launch;
      launch.kind = EventKind::kRuntimeApi;
      launch.track = host;
      launch.ts = now_ + 500;
      launch.dur = launch_len;
      launch.name = 1;
      launch.corr = static_cast<uint32_t>(++corr_);
      Event op = launch;
      op.kind = EventKind::kFrameworkOp;
      op.ts = now_;
      op.dur = launch_len + 1'000;
      op.name = static_cast<NameId>(2 + rng_() % 50);
      op.corr = 0;
      Event k;
      k.kind = EventKind::kKernel;
      k.track = stream;
      k.device = static_cast<uint8_t>(op_ % 8);
      k.ts = std::max(stream_free_[op_ % 8], launch.end() + 3'000);
      k.dur = 2'000 + rng_() % 58'000;
      k.name = static_cast<NameId>(100 + rng_() % 200);
      k.corr = launch.corr;
      k.payload.kernel.details = static_cast<NameId>(400 + rng_() % 20);
      k.payload.kernel.op = op.name;
      stream_free_[op_ % 8] = k.end();
      out->push_back(launch);
      out->push_back(op);
      out->push_back(k);
      now_ += 1'200;  // 4 host threads: each busy ~ half the time.
      ++op_;
    }
    // Completion order within the batch (as the reorder window gives it).
    std::sort(out->begin(), out->end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
  }
  uint64_t now() const { return now_; }

 private:
  std::mt19937_64 rng_;
  uint64_t now_ = 1'000'000, corr_ = 0, op_ = 0;
  uint64_t stream_free_[8] = {};
};

void BM_TraceStoreAppend(benchmark::State& state) {
  TraceGen gen(1);
  std::vector<std::vector<Event>> batches(256);
  for (auto& b : batches) gen.Next(&b, 4096);
  uint64_t events = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto store = std::make_unique<TraceStore>();
    state.ResumeTiming();
    for (const auto& b : batches) store->Append({}, b);
    events += 256 * 4096;
    state.PauseTiming();
    store.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
}
BENCHMARK(BM_TraceStoreAppend)->Unit(benchmark::kMillisecond);

// The same trace appended to a store with a run folder (`--trace-dir`): the
// sealed chunks and, at each Append, the open chunks' new events (tail
// records: what makes every event appended survive a kill) written to the
// folder, one write() per batch. Arg: events per Append (the pipeline's
// batch: thousands when busy, a few per round when quiet). Counters: disk
// bytes per event.
void BM_TraceStoreAppendToFolder(benchmark::State& state) {
  const size_t batch = static_cast<size_t>(state.range(0));
  TraceGen gen(1);
  std::vector<Event> all;
  for (int i = 0; i < 64; ++i) gen.Next(&all, 4096);
  const std::string dir = "/tmp/liveprof-bench-folder-" + std::to_string(::getpid());
  uint64_t events = 0, disk = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::filesystem::remove_all(dir);
    TraceStore::Options o;
    o.dir = dir;
    auto store = std::make_unique<TraceStore>(o);
    std::string error;
    if (!store->Create(&error)) state.SkipWithError(error.c_str());
    state.ResumeTiming();
    for (size_t i = 0; i < all.size(); i += batch) {
      store->Append({}, std::span<const Event>(all.data() + i, std::min(batch, all.size() - i)));
    }
    state.PauseTiming();
    events += all.size();
    disk += store->stats().disk_bytes;
    store.reset();
    state.ResumeTiming();
  }
  std::filesystem::remove_all(dir);
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["disk_B_per_event"] = static_cast<double>(disk) / static_cast<double>(events);
}
BENCHMARK(BM_TraceStoreAppendToFolder)->ArgName("batch")->Arg(4096)->Arg(64)->Unit(benchmark::kMillisecond);

size_t StoreEvents() {
  const char* env = std::getenv("LIVEPROF_BENCH_STORE_EVENTS");
  return env ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : size_t{10'000'000};
}

// One store for the query benchmarks, built once.
const TraceStore& BigStore() {
  static TraceStore* store = [] {
    TraceStore::Options o;
    o.max_bytes = UINT64_MAX;
    auto* s = new TraceStore(o);  // keep every event.
    TraceGen gen(2);
    std::vector<Event> batch;
    for (size_t n = 0; n < StoreEvents(); n += 4096) {
      gen.Next(&batch, 4096);
      s->Append({}, batch);
    }
    return s;
  }();
  return *store;
}

void BM_TraceStoreBytesPerEvent(benchmark::State& state) {
  const TraceStore& store = BigStore();
  for (auto _ : state) benchmark::DoNotOptimize(store.stats());
  const TraceStore::Stats s = store.stats();
  state.counters["events"] = static_cast<double>(s.events);
  state.counters["bytes_per_event"] = static_cast<double>(s.bytes) / static_cast<double>(s.events - s.dropped_events);
  state.counters["dropped"] = static_cast<double>(s.dropped_events);
}
BENCHMARK(BM_TraceStoreBytesPerEvent)->Iterations(1);

// zoom 0: the whole trace; 1: a middle zoom (1 / 1,000 of it, ~ 2 steps'
// worth at 100 M); 2: a deep zoom (1 / 1,000,000: a few kernels). Random
// positions; the p50 and p95 of the query times are counters.
void BM_ViewportQuery(benchmark::State& state) {
  const TraceStore& store = BigStore();
  const TraceStore::Stats s = store.stats();
  const uint64_t full = s.last_ns - s.first_ns;
  const uint64_t len = state.range(0) == 0 ? full : state.range(0) == 1 ? full / 1'000 : full / 1'000'000;
  std::mt19937_64 rng(3);
  std::vector<double> ms;
  uint64_t items = 0;
  for (auto _ : state) {
    const uint64_t t0 = s.first_ns + (len >= full ? 0 : rng() % (full - len));
    const auto start = std::chrono::steady_clock::now();
    const TraceQueryResult r = store.Query({{}, t0, t0 + len, 2000});
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    for (const auto& t : r.tracks) items += t.slices.size() + t.summaries.size();
  }
  std::sort(ms.begin(), ms.end());
  state.counters["p50_ms"] = ms[ms.size() / 2];
  state.counters["p95_ms"] = ms[std::min(ms.size() - 1, ms.size() * 95 / 100)];
  state.counters["items_per_query"] = static_cast<double>(items) / static_cast<double>(ms.size());
  state.counters["store_events"] = static_cast<double>(s.events);
}
BENCHMARK(BM_ViewportQuery)->ArgName("zoom")->Arg(0)->Arg(1)->Arg(2)->Iterations(100)->Unit(benchmark::kMillisecond);

// The pipeline thread's stall behind queries: appends
// LIVEPROF_BENCH_STALL_EVENTS events (default 10 M; 100 M for the issue's
// figure: ~2 GB) in batches of 4,096 into an empty store while (arg 1) a
// thread runs full-range queries back to back (2,000 px and 65,536 px in
// turn), or (arg 0) alone, the reference. Counters: the longest Append
// call (max_stall_ms: its own work plus any wait for the lock), the 99.9th
// percentile, the longest query and how many ran.
void BM_AppendStallUnderQueries(benchmark::State& state) {
  const char* env = std::getenv("LIVEPROF_BENCH_STALL_EVENTS");
  const size_t total = env ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : size_t{10'000'000};
  const bool queries = state.range(0) != 0;
  for (auto _ : state) {
    TraceStore::Options o;
    o.max_bytes = UINT64_MAX;  // keep every event: the query walks them all.
    TraceStore store(o);
    TraceGen gen(4);
    std::vector<Event> batch;
    gen.Next(&batch, 4096);
    store.Append({}, batch);
    std::atomic<bool> stop{false};
    uint64_t query_count = 0;
    double query_max_ms = 0;
    std::thread reader;
    if (queries) {
      reader = std::thread([&] {
        for (uint32_t width = 2000; !stop.load(std::memory_order_relaxed); width = width == 2000 ? 65536 : 2000) {
          const TraceStore::Stats s = store.stats();
          const auto start = std::chrono::steady_clock::now();
          const TraceQueryResult r = store.Query({{}, s.first_ns, s.last_ns + 1, width});
          benchmark::DoNotOptimize(r.tracks.size());
          query_max_ms =
              std::max(query_max_ms,
                       std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
          ++query_count;
        }
      });
    }
    std::vector<double> append_ms;
    append_ms.reserve(total / 4096 + 1);
    for (size_t n = 4096; n < total; n += 4096) {
      gen.Next(&batch, 4096);
      const auto start = std::chrono::steady_clock::now();
      store.Append({}, batch);
      append_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    stop = true;
    if (reader.joinable()) reader.join();
    std::sort(append_ms.begin(), append_ms.end());
    if (append_ms.empty()) {
      state.SkipWithError("LIVEPROF_BENCH_STALL_EVENTS too small: no batch appended");
      return;
    }
    state.counters["max_stall_ms"] = append_ms.back();
    state.counters["p999_append_ms"] = append_ms[append_ms.size() * 999 / 1000];
    state.counters["p50_append_ms"] = append_ms[append_ms.size() / 2];
    state.counters["queries"] = static_cast<double>(query_count);
    state.counters["query_max_ms"] = query_max_ms;
    state.counters["store_events"] = static_cast<double>(store.stats().events);
  }
}
BENCHMARK(BM_AppendStallUnderQueries)->ArgName("queries")->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace liveprof
