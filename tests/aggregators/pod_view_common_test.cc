// The pod view's common range: ranks compared over the same step numbers.
// A rank far behind the others (the demo's straggler) has its cells in every
// row drawn, is each row's worst and lags by its slowdown over the steps
// every rank has, while its own newest steps (an earlier, lighter phase of
// the job) would make it look the fastest. A randomized stream, fed one
// worker step at a time in a random interleaving, gives the same common
// range and per-worker figures as a batch computation over all its steps.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "aggregators/tf/pod_view.h"
#include "doctest/doctest.h"

namespace liveprof::pod_view_common_test {
namespace {

constexpr uint64_t kMs = 1'000'000;

PodCell CellOf(uint64_t step_ms, uint64_t input_ms) {
  PodCell c;
  c.step_ns = step_ms * kMs;
  c.bucket_ns[static_cast<size_t>(Bucket::kInput)] = input_ms * kMs;
  c.bucket_ns[static_cast<size_t>(Bucket::kDeviceCompute)] = (step_ms - input_ms) * kMs;
  return c;
}

const PodWorkerSummary& Worker(const PodSnapshot& s, uint32_t id) {
  for (const PodWorkerSummary& w : s.workers) {
    if (w.id == id) return w;
  }
  FAIL("no worker " << id);
  return s.workers.front();
}

// The healthy ranks' step time: 100 ms, then 300 ms from step 100 on (a
// heavier phase of the job, as the demo's schedule has).
uint64_t HealthyMs(int64_t n) { return n < 100 ? 100 : 300; }

TEST_CASE("pod view common range: a rank far behind is compared over the steps every rank has") {
  // Ranks 0, 1 and 3 (workers 1, 2, 4) run steps 0..149; rank 2 (worker
  // 3), 1.5x slower and late to start, has run steps 0..49: 100 behind.
  // The rows kept (max_steps 60) reach back to the frontier's 50 steps.
  Catalog catalog;
  PodViewOptions o;
  o.max_steps = 60;
  o.view_steps = 50;
  PodView behind(&catalog, o);
  const char* labels[] = {"rank 0", "rank 1", "rank 2", "rank 3"};
  int64_t slow_next = 0;
  for (int64_t n = 0; n < 150; ++n) {
    for (uint32_t w : {1u, 2u, 4u}) behind.AddExternalStep(w, labels[w - 1], n, CellOf(HealthyMs(n), 10));
    if (n % 3 == 0 && slow_next < 50) {  // (rank 2's step k comes with the others' step 3k)
      behind.AddExternalStep(3, labels[2], slow_next, CellOf(HealthyMs(slow_next) * 3 / 2, 10));
      ++slow_next;
    }
  }
  const PodSnapshot s = behind.Snapshot();
  CHECK(s.newest_step == 149);
  CHECK(s.common.frontier_step == 49);
  CHECK(s.common.first_step == 0);
  CHECK(s.common.last_step == 49);
  CHECK(s.common.steps == 50);
  CHECK(s.common.workers == 4);

  // The rows drawn are the common range: every rank has a cell, rank 2 is
  // the worst of each (not a healthy rank of the steps it has not reached).
  REQUIRE(s.steps.size() == 50);
  CHECK(s.steps.front().step_num == 0);
  CHECK(s.steps.back().step_num == 49);
  for (const PodStepRow& r : s.steps) {
    CHECK(r.cells.size() == 4);
    REQUIRE(r.worst.has_value());
    CHECK(*r.worst == 3);
    CHECK(r.median_ms == 100);
  }

  const PodWorkerSummary& r2 = Worker(s, 3);
  CHECK(r2.behind_steps == 100);
  CHECK(r2.last_step == 49);
  REQUIRE(r2.common.has_value());
  CHECK(r2.not_common.empty());
  CHECK(r2.common->steps == 50);
  CHECK(r2.common->mean_step_ms == 150);
  CHECK(r2.common->lag_ms == 50);
  CHECK(r2.common->lag_pct == 50);
  CHECK(r2.common->worst_count == 50);
  CHECK(r2.common->compared_steps == 50);
  CHECK(r2.common->input_pct == doctest::Approx(100.0 * 10 / 150));
  for (uint32_t w : {1u, 2u, 4u}) {
    const PodWorkerSummary& h = Worker(s, w);
    CHECK(h.behind_steps == 0);
    REQUIRE(h.common.has_value());
    CHECK(h.common->mean_step_ms == 100);
    CHECK(h.common->lag_ms == 0);
    CHECK(h.common->worst_count == 0);
    // Its own newest 100 steps (50..149) are 100 and 300 ms: 200 on average,
    // more than rank 2's own 150: the figure that hid the straggler.
    CHECK(h.mean_step_ms == 200);
    CHECK(h.mean_step_ms > r2.mean_step_ms);
  }
  REQUIRE(s.straggler.has_value());
  CHECK(s.straggler->worker == 3);
  CHECK(s.straggler->pct == 50);

  // Rank 2 catches up two steps: the range follows it.
  behind.AddExternalStep(3, labels[2], 50, CellOf(150, 10));
  behind.AddExternalStep(3, labels[2], 51, CellOf(150, 10));
  const PodSnapshot later = behind.Snapshot();
  CHECK(later.common.frontier_step == 51);
  CHECK(later.common.first_step == 2);
  CHECK(later.common.last_step == 51);
  CHECK(Worker(later, 3).behind_steps == 98);
  CHECK(later.steps.back().step_num == 51);
}

TEST_CASE("pod view common range: held cells are capped, and a rank beyond them is not compared and says why") {
  // Two ranks in step and a third at half their pace, 20 steps behind after
  // 40, with room for 30 cells in the rows: the oldest rows go, and rank 2's
  // steps with them; it is listed with its own numbers, not compared.
  Catalog catalog;
  PodViewOptions o;
  o.max_steps = 5;
  o.view_steps = 5;
  o.max_held_cells = 30;
  PodView pod(&catalog, o);
  for (int64_t n = 0; n <= 40; ++n) {
    pod.AddExternalStep(1, "rank 0", n, CellOf(100, 0));
    pod.AddExternalStep(2, "rank 1", n, CellOf(100, 0));
    if (n % 2 == 0) pod.AddExternalStep(3, "rank 2", n / 2, CellOf(150, 0));
  }
  const PodSnapshot s = pod.Snapshot();
  const PodWorkerSummary& r2 = Worker(s, 3);
  CHECK_FALSE(r2.common.has_value());
  CHECK(r2.not_common == "behind the held steps");
  CHECK(r2.behind_steps == 20);
  CHECK(r2.mean_step_ms == 150);  // its own steps still.
  CHECK(s.common.workers == 2);
  CHECK(s.common.frontier_step == 40);
  CHECK(s.common.steps == 5);
  CHECK(s.steps_in_window == 5);  // back to the newest max_steps.
  CHECK(s.diagnostics.cells_outside_window > 0);
  REQUIRE(s.straggler.has_value());
  CHECK(s.straggler->worker == 3);  // compared with the medians its steps had.
}

// One worker's step as the batch check keeps it.
struct Added {
  uint32_t worker;
  int64_t step;
  PodCell cell;
};

// The common range and per-worker common figures from every step added,
// as the header defines them (no row gone: max_held_cells is ample).
struct Batch {
  int64_t frontier = -1, first = -1, last = -1;
  uint64_t steps = 0;
  std::map<uint32_t, PodCommonSummary> per_worker;
};

Batch BatchCommon(const std::vector<Added>& all, size_t view_steps) {
  std::map<int64_t, std::map<uint32_t, PodCell>> rows;  // step -> worker -> cell (the newer kept).
  std::map<uint32_t, int64_t> last;
  for (const Added& a : all) {
    rows[a.step][a.worker] = a.cell;
    last[a.worker] = std::max(last.count(a.worker) ? last[a.worker] : -1, a.step);
  }
  Batch b;
  for (const auto& [w, l] : last) b.frontier = b.frontier < 0 ? l : std::min(b.frontier, l);
  std::map<uint32_t, double> lag_ns, ref_ns;
  for (int64_t n = b.frontier; n >= 0 && n > b.frontier - static_cast<int64_t>(view_steps); --n) {
    const auto r = rows.find(n);
    if (r == rows.end() || r->second.size() != last.size()) continue;
    if (b.steps++ == 0) b.last = n;
    b.first = n;
    std::vector<uint64_t> times;
    uint32_t worst = 0;
    uint64_t worst_ns = 0;
    for (const auto& [w, c] : r->second) {
      times.push_back(c.step_ns);
      if (c.step_ns > worst_ns) worst = w, worst_ns = c.step_ns;  // (ties: the smaller id, first)
    }
    std::sort(times.begin(), times.end());
    const size_t k = times.size();
    const double median = k % 2 ? static_cast<double>(times[k / 2])
                                : (static_cast<double>(times[k / 2 - 1]) + static_cast<double>(times[k / 2])) / 2;
    for (const auto& [w, c] : r->second) {
      PodCommonSummary& m = b.per_worker[w];
      ++m.steps;
      m.mean_step_ms += static_cast<double>(c.step_ns);  // (sums here, means below)
      m.input_pct += static_cast<double>(c.bucket_ns[static_cast<size_t>(Bucket::kInput)]);
      m.worst_count += w == worst && k >= 2 ? 1 : 0;
      if (k < 2) continue;
      const double ref = k == 2 ? 2 * median - static_cast<double>(c.step_ns) : median;
      ++m.compared_steps;
      lag_ns[w] += static_cast<double>(c.step_ns) - ref;
      ref_ns[w] += ref;
    }
  }
  for (auto& [w, m] : b.per_worker) {
    m.input_pct = m.mean_step_ms > 0 ? 100.0 * m.input_pct / m.mean_step_ms : 0;
    m.mean_step_ms = m.mean_step_ms / 1e6 / static_cast<double>(m.steps);
    m.lag_ms = m.compared_steps ? lag_ns[w] / 1e6 / static_cast<double>(m.compared_steps) : 0;
    m.lag_pct = ref_ns[w] > 0 ? 100.0 * lag_ns[w] / ref_ns[w] : 0;
  }
  return b;
}

TEST_CASE("pod view common range: incremental equals batch on randomized streams") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    const uint32_t workers = 2 + rng() % 4;
    PodViewOptions o;
    o.max_steps = 8 + rng() % 8;  // rows beyond it are kept for the common range.
    o.view_steps = 3 + rng() % 8;
    Catalog catalog;
    PodView pod(&catalog, o);
    std::vector<int64_t> next(workers + 1, 0);
    std::vector<Added> all;
    // Each worker's steps in order, some skipped (a gap: no cell), at its
    // own pace; every worker steps at least once every three rounds (never
    // quiet: max_steps × workers cells go by first).
    for (uint32_t round = 0; round < 120; ++round) {
      for (uint32_t w = 1; w <= workers; ++w) {
        const uint32_t pace = w == 1 ? 1 : 2;  // worker 1 is the slow one.
        uint32_t n = rng() % (pace + 1);
        if (n == 0 && (round % 3 == 2 || round == 0)) n = 1;
        for (uint32_t i = 0; i < n; ++i) {
          if (rng() % 10 == 0) ++next[w];  // skips a step number.
          PodCell c = CellOf(50 + rng() % 100, rng() % 20);
          all.push_back({w, next[w], c});
          pod.AddExternalStep(w, "rank " + std::to_string(w - 1), next[w]++, c);
        }
      }
      if (round % 7 != 6) continue;
      const PodSnapshot s = pod.Snapshot();
      const Batch b = BatchCommon(all, std::min(o.view_steps, o.max_steps));
      CAPTURE(seed);
      CAPTURE(round);
      REQUIRE(s.common.workers == workers);
      CHECK(s.common.frontier_step == b.frontier);
      CHECK(s.common.first_step == b.first);
      CHECK(s.common.last_step == b.last);
      CHECK(s.common.steps == b.steps);
      for (const PodWorkerSummary& w : s.workers) {
        REQUIRE(w.common.has_value());
        const PodCommonSummary want = b.per_worker.count(w.id) ? b.per_worker.at(w.id) : PodCommonSummary{};
        CHECK(w.common->steps == want.steps);
        CHECK(w.common->worst_count == want.worst_count);
        CHECK(w.common->compared_steps == want.compared_steps);
        CHECK(w.common->mean_step_ms == doctest::Approx(want.mean_step_ms).epsilon(1e-12));
        CHECK(w.common->input_pct == doctest::Approx(want.input_pct).epsilon(1e-12));
        CHECK(w.common->lag_ms == doctest::Approx(want.lag_ms).epsilon(1e-9));
        CHECK(w.common->lag_pct == doctest::Approx(want.lag_pct).epsilon(1e-9));
      }
      // The rows drawn end at the frontier.
      if (!s.steps.empty()) CHECK(s.steps.back().step_num <= b.frontier);
    }
  }
}

}  // namespace
}  // namespace liveprof::pod_view_common_test
