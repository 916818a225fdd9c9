// U64Map (src/base/flat_map.h) against boost::unordered_flat_map<uint64_t,
// uint64_t> (Boost 1.81) on the operation streams of U64Map's users, each
// with its keys and mix:
//   Steps      StepAssembler::launch_step_'s stream until a CorrWindow
//              (base/corr_window.h) replaced the map there; kept as a
//              growing-id workload: CUPTI correlation ids, per step 1000
//              launches, each inserted twice (the runtime and the driver
//              record share the id), one find per kernel, and the launches
//              of the step 16 closed steps back erased (~17,000 live).
//   MemLive    MemoryState's live map, address -> bytes: a caching
//              allocator's ~10,000 live blocks at 2 MiB strides, churned in
//              blocks of 1000 frees (erase) then 1000 allocations (insert).
//   MemHist    MemoryState's size -> count histogram: HistAdd (insert and
//              ++) per allocation, HistRemove (find, --, erase at 0) per free,
//              over a few hundred distinct 512 B-rounded sizes.
//   ImportOps  the Chrome trace importer's op_of_external: 200,000 ops' External
//              ids (growing, gaps of 1-4) inserted into a fresh map, then one
//              find per kernel (3 per op on average, in order; 10 % misses).
// Each benchmark times its blocks of one kind of operation (1000 or more
// operations) apart, in this thread's CPU time, and reports ns per operation
// of each kind as counters (insert_ns, find_ns, erase_ns) and over the whole
// mix (mix_ns). Figures: bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <boost/unordered/unordered_flat_map.hpp>

#include <time.h>

#include <cstdint>
#include <random>
#include <vector>

#include "base/flat_map.h"

namespace liveprof {
namespace {

struct Ours {
  U64Map m;
  uint64_t* Insert(uint64_t key, bool* inserted) {
    const auto [value, ins] = m.Insert(key);
    *inserted = ins;
    return value;
  }
  uint64_t* Find(uint64_t key) { return m.Find(key); }
  bool Erase(uint64_t key, uint64_t* value) { return m.Erase(key, value); }
  size_t size() const { return m.size(); }
};

struct Boost {
  boost::unordered_flat_map<uint64_t, uint64_t> m;
  uint64_t* Insert(uint64_t key, bool* inserted) {
    const auto [it, ins] = m.try_emplace(key, 0);
    *inserted = ins;
    return &it->second;
  }
  uint64_t* Find(uint64_t key) {
    const auto it = m.find(key);
    return it == m.end() ? nullptr : &it->second;
  }
  bool Erase(uint64_t key, uint64_t* value) {
    const auto it = m.find(key);
    if (it == m.end()) return false;
    *value = it->second;
    m.erase(it);
    return true;
  }
  size_t size() const { return m.size(); }
};

// This thread's CPU time, ns: a block's cost without the time other
// processes of a shared machine take the core.
double ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// ns and operations per kind of operation, over a benchmark's iterations.
struct Tally {
  double ns[3] = {0, 0, 0};
  double ops[3] = {0, 0, 0};
  enum Kind { kInsert, kFind, kErase };
  template <typename F>
  void Time(Kind k, size_t n, F&& f) {
    const double t0 = ThreadCpuNs();
    f();
    ns[k] += ThreadCpuNs() - t0;
    ops[k] += static_cast<double>(n);
  }
  void Report(benchmark::State& state) const {
    const char* names[3] = {"insert_ns", "find_ns", "erase_ns"};
    double total_ns = 0, total_ops = 0;
    for (int k = 0; k < 3; ++k) {
      if (ops[k] > 0) state.counters[names[k]] = ns[k] / ops[k];
      total_ns += ns[k];
      total_ops += ops[k];
    }
    state.counters["mix_ns"] = total_ns / total_ops;
    state.SetItemsProcessed(static_cast<int64_t>(total_ops));
  }
};

// --- Steps: correlation id -> (step << 1) | satisfied --------------------

constexpr size_t kLaunchesPerStep = 1000;
constexpr size_t kRememberClosed = 16;  // steps.h

template <typename Map>
void BM_FlatMapSteps(benchmark::State& state) {
  Map map;
  std::mt19937_64 rng(7);
  uint64_t corr = 1, seq = 0;
  std::vector<std::vector<uint64_t>> closed;  // oldest first
  std::vector<uint64_t> launches;
  Tally tally;
  uint64_t sink = 0;
  auto step = [&](bool timed) {
    launches.clear();
    for (size_t i = 0; i < kLaunchesPerStep; ++i) {
      corr += 1 + rng() % 3;  // other API calls take ids too.
      launches.push_back(corr);
    }
    Tally scratch;
    Tally& t = timed ? tally : scratch;
    t.Time(Tally::kInsert, 2 * launches.size(), [&] {
      for (const uint64_t c : launches) {
        for (int record = 0; record < 2; ++record) {
          bool inserted;
          uint64_t* slot = map.Insert(c, &inserted);
          if (!inserted && (*slot >> 1) == seq) continue;
          *slot = (seq << 1);
        }
      }
    });
    t.Time(Tally::kFind, launches.size(), [&] {
      for (const uint64_t c : launches) {
        if (uint64_t* packed = map.Find(c)) {
          *packed |= 1;
          sink += *packed;
        }
      }
    });
    closed.push_back(launches);
    if (closed.size() > kRememberClosed) {
      const std::vector<uint64_t>& oldest = closed.front();
      t.Time(Tally::kErase, oldest.size(), [&] {
        uint64_t unused;
        for (const uint64_t c : oldest) map.Erase(c, &unused);
      });
      closed.erase(closed.begin());
    }
    ++seq;
  };
  for (size_t i = 0; i < 2 * kRememberClosed; ++i) step(false);  // steady state
  for (auto _ : state) step(true);
  benchmark::DoNotOptimize(sink);
  tally.Report(state);
  state.counters["live"] = static_cast<double>(map.size());
}

// --- MemLive: address -> bytes --------------------------------------------

constexpr uint64_t kLive = 10'000;
constexpr uint64_t kSlotBytes = uint64_t{2} << 20;
constexpr uint64_t kBase = uint64_t{0x7f00} << 32;
constexpr size_t kChurn = 1000;

uint64_t TensorBytes(std::mt19937_64& rng) {  // as memory_state_bench.cc
  const uint64_t units = 1 + (rng() % 64) * (1 + rng() % 32);
  return units * 512;
}

// Pre-drawn random indexes, so that drawing costs little next to the maps.
class Picks {
 public:
  explicit Picks(std::mt19937_64& rng) : picks_(1 << 16) {
    for (size_t& p : picks_) p = rng();
  }
  size_t Below(size_t n) { return picks_[next_++ & (picks_.size() - 1)] % n; }

 private:
  std::vector<size_t> picks_;
  size_t next_ = 0;
};

template <typename Map>
void BM_FlatMapMemLive(benchmark::State& state) {
  Map map;
  std::mt19937_64 rng(42);
  std::vector<uint64_t> live, free;
  for (uint64_t slot = 0; slot < 2 * kLive; ++slot) {
    const uint64_t address = kBase + slot * kSlotBytes;
    if (slot % 2 == 0) {
      bool inserted;
      *map.Insert(address, &inserted) = TensorBytes(rng);
      live.push_back(address);
    } else {
      free.push_back(address);
    }
  }
  Picks picks(rng);  // which live blocks go, which free ones come.
  std::vector<uint64_t> freed, allocated;
  Tally tally;
  uint64_t sink = 0;
  for (auto _ : state) {
    freed.clear();
    allocated.clear();
    for (size_t i = 0; i < kChurn; ++i) {
      const size_t li = picks.Below(live.size());
      freed.push_back(live[li]);
      live[li] = live.back();
      live.pop_back();
      const size_t fi = picks.Below(free.size());
      allocated.push_back(free[fi]);
      free[fi] = free.back();
      free.pop_back();
    }
    tally.Time(Tally::kErase, freed.size(), [&] {
      for (const uint64_t a : freed) {
        uint64_t bytes = 0;
        if (map.Erase(a, &bytes)) sink += bytes;
      }
    });
    tally.Time(Tally::kInsert, allocated.size(), [&] {
      for (const uint64_t a : allocated) {
        bool inserted;
        uint64_t* value = map.Insert(a, &inserted);
        if (!inserted) sink += *value;
        *value = a >> 9;
      }
    });
    live.insert(live.end(), allocated.begin(), allocated.end());
    free.insert(free.end(), freed.begin(), freed.end());
  }
  benchmark::DoNotOptimize(sink);
  tally.Report(state);
}

// --- MemHist: size -> count -----------------------------------------------

template <typename Map>
void BM_FlatMapMemHist(benchmark::State& state) {
  Map map;
  std::mt19937_64 rng(42);
  auto add = [&](uint64_t bytes) {
    bool inserted;
    ++*map.Insert(bytes, &inserted);
  };
  auto remove = [&](uint64_t bytes) {
    uint64_t* count = map.Find(bytes);
    if (count == nullptr) return;
    if (--*count == 0) {
      uint64_t unused;
      map.Erase(bytes, &unused);
    }
  };
  std::vector<uint64_t> live;
  for (uint64_t i = 0; i < kLive; ++i) {
    live.push_back(TensorBytes(rng));
    add(live.back());
  }
  Picks picks(rng);
  std::vector<uint64_t> sizes(1 << 16);
  for (uint64_t& s : sizes) s = TensorBytes(rng);
  size_t next_size = 0;
  std::vector<uint64_t> freed, allocated;
  Tally tally;
  for (auto _ : state) {
    freed.clear();
    allocated.clear();
    for (size_t i = 0; i < kChurn; ++i) {
      const size_t li = picks.Below(live.size());
      freed.push_back(live[li]);
      live[li] = sizes[next_size++ & (sizes.size() - 1)];
      allocated.push_back(live[li]);
    }
    // HistRemove: a find, and an erase when the count reaches 0.
    tally.Time(Tally::kFind, freed.size(), [&] {
      for (const uint64_t b : freed) remove(b);
    });
    // HistAdd: an insert (or a find of the present size) and ++.
    tally.Time(Tally::kInsert, allocated.size(), [&] {
      for (const uint64_t b : allocated) add(b);
    });
  }
  tally.Report(state);
  state.counters["sizes"] = static_cast<double>(map.size());
}

// --- ImportOps: External id -> op name id ---------------------------------

constexpr size_t kOps = 200'000;

template <typename Map>
void BM_FlatMapImportOps(benchmark::State& state) {
  std::mt19937_64 rng(3);
  std::vector<uint64_t> ops(kOps);
  uint64_t id = 0;
  for (uint64_t& o : ops) o = id += 1 + rng() % 4;
  std::vector<uint64_t> kernels;  // in order, 0-6 kernels per op, some unmatched.
  for (const uint64_t o : ops) {
    const size_t n = rng() % 7;
    for (size_t k = 0; k < n; ++k) kernels.push_back(rng() % 10 == 0 ? o + id : o);
  }
  Tally tally;
  uint64_t sink = 0;
  for (auto _ : state) {
    Map map;
    tally.Time(Tally::kInsert, ops.size(), [&] {
      for (const uint64_t o : ops) {
        bool inserted;
        *map.Insert(o, &inserted) = o & 0xffff;
      }
    });
    tally.Time(Tally::kFind, kernels.size(), [&] {
      for (const uint64_t k : kernels) {
        const uint64_t* op = map.Find(k);
        sink += op ? *op : 0;
      }
    });
  }
  benchmark::DoNotOptimize(sink);
  tally.Report(state);
}

BENCHMARK_TEMPLATE(BM_FlatMapSteps, Ours);
BENCHMARK_TEMPLATE(BM_FlatMapSteps, Boost);
BENCHMARK_TEMPLATE(BM_FlatMapMemLive, Ours);
BENCHMARK_TEMPLATE(BM_FlatMapMemLive, Boost);
BENCHMARK_TEMPLATE(BM_FlatMapMemHist, Ours);
BENCHMARK_TEMPLATE(BM_FlatMapMemHist, Boost);
BENCHMARK_TEMPLATE(BM_FlatMapImportOps, Ours)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_FlatMapImportOps, Boost)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace liveprof
