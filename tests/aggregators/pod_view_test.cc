// The pod view: workers fabricated with known step times and buckets give
// exact medians, worst workers and per-worker means; a worker missing steps
// lacks those cells; arrival order does not matter; correlation ids that
// collide across workers never join one worker's launch to another's
// kernel; the straggler rule fires after k steps, names the worker and
// resolves; the JSON view carries the same numbers.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "aggregators/analyses.h"
#include "aggregators/tf/pod_view.h"
#include "doctest/doctest.h"
#include "event_builder.h"
#include "stream/stream.h"

namespace liveprof::pod_view_test {
namespace {

using test::Input;
using test::Kernel;
using test::Launch;
using test::Step;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kStepSpacingNs = 10'000'000'000;  // steps 10 s apart: each closes alone.
constexpr uint64_t kT0 = 1'000'000'000;
constexpr NameId kInputName = 1, kLaunchName = 2, kKernelName = 3, kFirstRankName = 10;
const char* const kRankNames[] = {"rank 0", "rank 1", "rank 2", "rank 3"};

// A worker's tracks: its label (kProcess), a host thread and a GPU stream.
struct FakeWorker {
  uint32_t process;
  TrackId label_track, host, gpu;
};

FakeWorker MakeWorker(uint32_t process) {
  const TrackId base = static_cast<TrackId>(10 * process);
  return {process, base, base + 1, base + 2};
}

std::vector<Event> Definitions(const std::vector<FakeWorker>& workers) {
  std::vector<Event> d;
  auto name = [&](NameId id, const char* s) { d.push_back(test::NameDef(id, s, std::string_view(s).size())); };
  name(kInputName, "IteratorGetNext");
  name(kLaunchName, "cudaLaunchKernel");
  name(kKernelName, "gemm_kernel");
  for (const FakeWorker& w : workers) {
    const NameId label = kFirstRankName + w.process - 1;
    name(label, kRankNames[w.process - 1]);
    d.push_back(TrackDefEvent(w.label_track, {label, TrackType::kProcess, 0, 0, w.process}));
    d.push_back(TrackDefEvent(w.host, {0, TrackType::kHostThread, 100 + w.process, 0, w.process}));
    d.push_back(TrackDefEvent(w.gpu, {0, TrackType::kGpuStream, 7, 0, w.process}));
  }
  return d;
}

// One step of a worker: marker [b, b+step), input [b, b+input), one launch
// and its kernel right after; the rest of the step is "All others". Gives
// input = input_ms, kernel launch = launch_ms, device compute = kernel_ms.
struct Shape {
  uint64_t step_ms, input_ms, launch_ms, kernel_ms;
};

void AddStep(std::vector<Event>* out, const FakeWorker& w, int64_t n, Shape s, uint32_t corr, uint64_t shift_ns = 0) {
  const uint64_t b = kT0 + static_cast<uint64_t>(n) * kStepSpacingNs + shift_ns;
  Event in = Input(b, s.input_ms * kMs, kInputName, w.host);
  in.sub = static_cast<uint8_t>(InputStage::kWait);
  const uint64_t l = b + s.input_ms * kMs;
  out->push_back(in);
  out->push_back(Launch(l, s.launch_ms * kMs, corr, kLaunchName, w.host));
  out->push_back(Kernel(l + s.launch_ms * kMs, s.kernel_ms * kMs, kKernelName, corr, w.gpu));
  out->push_back(Step(b, s.step_ms * kMs, n, w.host));
}

void SortByEnd(std::vector<Event>* events) {
  std::stable_sort(events->begin(), events->end(), [](const Event& a, const Event& b) { return a.end() < b.end(); });
}

// The three workers of the value tests: rank 0 at 100 ms, rank 1 at 110 ms,
// rank 2 at 100 ms then 150, 160, 170 ms (its input wait grows by as much).
Shape ShapeOf(uint32_t process, int64_t n) {
  if (process == 1) return {100, 10, 5, 60};
  if (process == 2) return {110, 20, 5, 60};
  const uint64_t extra[] = {0, 50, 60, 70};
  return {100 + extra[n], 10 + extra[n], 5, 60};
}

std::vector<Event> ThreeWorkerEvents(const std::vector<FakeWorker>& workers, int64_t steps) {
  std::vector<Event> events;
  for (const FakeWorker& w : workers) {
    for (int64_t n = 0; n < steps; ++n) {
      AddStep(&events, w, n, ShapeOf(w.process, n), static_cast<uint32_t>(n + 1));  // ids collide.
    }
  }
  SortByEnd(&events);
  return events;
}

struct Fed {
  Catalog catalog;
  PodView pod;
  explicit Fed(PodViewOptions o = {}) : pod(&catalog, o) {}
  void Definitions(const std::vector<Event>& d) {
    catalog.Consume(d);
    pod.ConsumeDefinitions(d);
  }
};

// A pod view fed `events` (sorted here) of `workers`, flushed.
std::unique_ptr<Fed> Run(const std::vector<FakeWorker>& workers, std::vector<Event> events,
                         PodViewOptions options = {}) {
  SortByEnd(&events);
  auto f = std::make_unique<Fed>(options);
  f->Definitions(Definitions(workers));
  f->pod.Consume(events);
  f->pod.Flush();
  return f;
}

const PodWorkerSummary& WorkerById(const PodSnapshot& s, uint32_t id) {
  for (const PodWorkerSummary& w : s.workers) {
    if (w.id == id) return w;
  }
  FAIL("no worker " << id);
  return s.workers.front();
}

const PodCell* CellOf(const PodStepRow& row, uint32_t worker) {
  for (const PodCell& c : row.cells) {
    if (c.worker == worker) return &c;
  }
  return nullptr;
}

double BucketMs(const PodCell& c, Bucket b) { return static_cast<double>(c.bucket_ns[static_cast<size_t>(b)]) / 1e6; }

TEST_CASE("pod view: three workers give exact medians, worst workers and per-worker means") {
  const std::vector<FakeWorker> workers = {MakeWorker(1), MakeWorker(2), MakeWorker(3)};
  const std::unique_ptr<Fed> f = Run(workers, ThreeWorkerEvents(workers, 4));
  const PodSnapshot s = f->pod.Snapshot();

  REQUIRE(s.workers.size() == 3);  // process 0 has no step: not listed.
  CHECK(s.workers[0].label == "rank 0");
  CHECK(s.workers[2].label == "rank 2");
  REQUIRE(s.steps.size() == 4);
  CHECK(s.cells_total == 12);
  const double medians[] = {100, 110, 110, 110};
  const uint32_t worst[] = {2, 3, 3, 3};
  for (size_t n = 0; n < 4; ++n) {
    CAPTURE(n);
    CHECK(s.steps[n].step_num == static_cast<int64_t>(n));
    CHECK(s.steps[n].median_ms == medians[n]);
    REQUIRE(s.steps[n].worst.has_value());
    CHECK(*s.steps[n].worst == worst[n]);
    REQUIRE(s.steps[n].cells.size() == 3);
  }
  // Rank 2's step 3: 170 ms = input 80 + launch 5 + compute 60 + others 25.
  const PodCell* c = CellOf(s.steps[3], 3);
  REQUIRE(c != nullptr);
  CHECK(c->step_ns == 170 * kMs);
  CHECK(BucketMs(*c, Bucket::kInput) == 80);
  CHECK(BucketMs(*c, Bucket::kKernelLaunch) == 5);
  CHECK(BucketMs(*c, Bucket::kDeviceCompute) == 60);
  CHECK(BucketMs(*c, Bucket::kAllOthers) == 25);
  CHECK(BucketMs(*c, Bucket::kHostCompute) == 0);

  const PodWorkerSummary& r0 = WorkerById(s, 1);
  CHECK(r0.steps == 4);
  CHECK(r0.mean_step_ms == 100);
  CHECK(r0.mean_ms[static_cast<size_t>(Bucket::kInput)] == 10);
  CHECK(r0.mean_ms[static_cast<size_t>(Bucket::kAllOthers)] == 25);
  CHECK(r0.input_pct == 10);
  CHECK(r0.worst_count == 0);
  CHECK(r0.lag_ms == -7.5);  // 0, -10, -10, -10 against the medians.
  CHECK(r0.lag_pct == doctest::Approx(-30.0 * 100 / 430));

  const PodWorkerSummary& r1 = WorkerById(s, 2);
  CHECK(r1.mean_step_ms == 110);
  CHECK(r1.input_pct == doctest::Approx(100.0 * 20 / 110));
  CHECK(r1.worst_count == 1);
  CHECK(r1.lag_ms == 2.5);

  const PodWorkerSummary& r2 = WorkerById(s, 3);
  CHECK(r2.mean_step_ms == 145);                                 // (100 + 150 + 160 + 170) / 4
  CHECK(r2.mean_ms[static_cast<size_t>(Bucket::kInput)] == 55);  // (10 + 60 + 70 + 80) / 4
  CHECK(r2.input_pct == doctest::Approx(100.0 * 220 / 580));
  CHECK(r2.worst_count == 3);
  CHECK(r2.lag_ms == 37.5);  // 0, 40, 50, 60
  CHECK(r2.lag_pct == doctest::Approx(150.0 * 100 / 430));
  // Held over its last 3 steps: the smallest of +40, +50, +60 ms over 110.
  REQUIRE(r2.straggler_pct.has_value());
  CHECK(*r2.straggler_pct == doctest::Approx(4000.0 / 110));

  REQUIRE(s.straggler.has_value());
  CHECK(s.straggler->worker == 3);
  CHECK(s.straggler->label == "rank 2");
  CHECK(s.straggler->pct == doctest::Approx(4000.0 / 110));
  CHECK(s.straggler->first_step == 1);
  CHECK(s.straggler->last_step == 3);
  CHECK(s.straggler->workers_compared == 3);
  // Over 4 steps, step 0 (+0) is the smallest: no longer a straggler by much.
  const std::optional<PodStraggler> four = f->pod.Straggler(4);
  REQUIRE(four.has_value());
  CHECK(four->worker == 2);  // rank 1: +10, 0, 0, 0 → 0; rank 2: 0; the tie goes to the smaller id.
  CHECK(four->pct == 0);
  CHECK_FALSE(f->pod.Straggler(5).has_value());  // nobody has 5 compared steps.
}

TEST_CASE("pod view: a worker missing steps lacks those cells, two workers compare with each other") {
  const std::vector<FakeWorker> workers = {MakeWorker(1), MakeWorker(2), MakeWorker(3)};
  std::vector<Event> events;
  for (const FakeWorker& w : workers) {
    for (int64_t n = 0; n < 4; ++n) {
      if (w.process == 3 && (n == 1 || n == 3)) continue;  // rank 2 misses steps 1 and 3.
      AddStep(&events, w, n, ShapeOf(w.process, n), static_cast<uint32_t>(n + 1));
    }
  }
  const PodSnapshot s = Run(workers, events)->pod.Snapshot();
  // Rank 2's last step is 2: the rows drawn end there (the frontier), and
  // the common range is the steps every rank has: 0 and 2.
  CHECK(s.newest_step == 3);
  CHECK(s.common.frontier_step == 2);
  CHECK(s.common.steps == 2);
  CHECK(s.common.first_step == 0);
  CHECK(s.common.last_step == 2);
  REQUIRE(s.steps.size() == 3);
  CHECK(s.steps[1].cells.size() == 2);
  CHECK(CellOf(s.steps[1], 3) == nullptr);
  // Two cells: the median is their mean; each is compared with the other.
  CHECK(s.steps[1].median_ms == 105);
  CHECK(*s.steps[1].worst == 2);
  const PodWorkerSummary& r2 = WorkerById(s, 3);
  CHECK(r2.steps == 2);
  CHECK(r2.first_step == 0);
  CHECK(r2.last_step == 2);
  CHECK(r2.mean_step_ms == 130);  // (100 + 160) / 2
  REQUIRE(r2.common.has_value());
  CHECK(r2.common->steps == 2);
  CHECK(r2.common->mean_step_ms == 130);
  CHECK(r2.common->worst_count == 1);  // step 2 (160 ms); step 0: rank 1's.
  const PodWorkerSummary& r0 = WorkerById(s, 1);
  REQUIRE(r0.common.has_value());
  CHECK(r0.common->lag_ms == -5);  // 100 vs 100, 100 vs 110.
  CHECK(r0.common->compared_steps == 2);
  // Rank 0 against: 100 (median of 100, 110, 100), 110 (rank 1 alone),
  // 110 (median), 110 (rank 1 alone) → 0, -10, -10, -10.
  CHECK(r0.lag_ms == -7.5);
  CHECK(r0.compared_steps == 4);
  // Rank 1: +10 over the median 100, +10 over rank 0 alone, 0 against the
  // median 110, +10 over rank 0 alone.
  const PodWorkerSummary& r1 = WorkerById(s, 2);
  CHECK(r1.lag_ms == 7.5);
  CHECK(r1.worst_count == 3);
}

TEST_CASE("pod view: the order the workers' events arrive in does not change the view") {
  const std::vector<FakeWorker> workers = {MakeWorker(1), MakeWorker(2), MakeWorker(3)};
  const std::vector<Event> defs = Definitions(workers);
  Fed interleaved;
  interleaved.Definitions(defs);
  interleaved.pod.Consume(ThreeWorkerEvents(workers, 4));
  interleaved.pod.Flush();

  // Rank 2's whole run first, then rank 0's, then rank 1's, in small batches.
  Fed reordered;
  reordered.Definitions(defs);
  for (const uint32_t p : {3u, 1u, 2u}) {
    std::vector<Event> mine;
    for (int64_t n = 0; n < 4; ++n) {
      AddStep(&mine, workers[p - 1], n, ShapeOf(p, n), static_cast<uint32_t>(n + 1));
    }
    SortByEnd(&mine);
    for (size_t i = 0; i < mine.size(); i += 3) {
      const size_t n = std::min<size_t>(3, mine.size() - i);
      reordered.pod.Consume(std::span<const Event>(mine.data() + i, n));
    }
  }
  reordered.pod.Flush();

  JsonWriter a, b;
  interleaved.pod.Snapshot().WriteJson(a);
  reordered.pod.Snapshot().WriteJson(b);
  CHECK(a.str() == b.str());
  CHECK(reordered.pod.Snapshot().steps.size() == 4);
  CHECK(reordered.pod.Snapshot().straggler->worker == 3);
}

TEST_CASE("pod view: correlation ids colliding across workers do not cross-join") {
  // Both workers launch with correlation ids 1, 2, 3; rank 1's steps begin
  // 30 ms after rank 0's, so its kernels come while rank 0's steps are still
  // open: one assembler for both would join rank 1's kernel to rank 0's
  // launch of the same id.
  const std::vector<FakeWorker> workers = {MakeWorker(1), MakeWorker(2)};
  std::vector<Event> events;
  for (int64_t n = 0; n < 3; ++n) {
    const uint32_t corr = static_cast<uint32_t>(n + 1);
    AddStep(&events, workers[0], n, {100, 10, 5, 60}, corr);
    AddStep(&events, workers[1], n, {100, 10, 5, 20}, corr, 30 * kMs);
  }
  const PodSnapshot s = Run(workers, events)->pod.Snapshot();
  REQUIRE(s.steps.size() == 3);
  for (const PodStepRow& row : s.steps) {
    CAPTURE(row.step_num);
    const PodCell* a = CellOf(row, 1);
    const PodCell* b = CellOf(row, 2);
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    CHECK(BucketMs(*a, Bucket::kDeviceCompute) == 60);
    CHECK(BucketMs(*b, Bucket::kDeviceCompute) == 20);
    CHECK(BucketMs(*b, Bucket::kAllOthers) == 65);
  }
  CHECK(s.diagnostics.device_without_launch == 0);
  CHECK(s.diagnostics.late_for_step == 0);
}

TEST_CASE("pod view: a process is a worker only once it has steps, the caps count") {
  const std::vector<FakeWorker> workers = {MakeWorker(1), MakeWorker(2), MakeWorker(3)};
  PodViewOptions o;
  o.max_workers = 2;
  o.max_steps = 3;
  Fed f(o);
  f.Definitions(Definitions(workers));  // rank 2's tracks are beyond the cap.
  // Defined, no step yet (a DataLoader worker never has one): not listed.
  CHECK(f.pod.workers() == 0);
  CHECK(f.pod.Snapshot().workers.empty());
  std::vector<Event> events = ThreeWorkerEvents(workers, 4);
  // A local step (tracks 0..: process 0) too.
  events.push_back(Step(kT0 + 4 * kStepSpacingNs, 50 * kMs, 3, 0));
  events.push_back(test::Op(kT0 + 4 * kStepSpacingNs, 50 * kMs, kKernelName, 0));  // host compute.
  SortByEnd(&events);
  f.pod.Consume(events);
  f.pod.Flush();
  const PodSnapshot s = f.pod.Snapshot();
  REQUIRE(s.workers.size() == 3);
  CHECK(s.workers[0].id == 0);
  CHECK(s.workers[0].label == "local");
  CHECK(s.workers[0].steps == 1);
  CHECK(s.diagnostics.workers_over_cap == 1);
  CHECK(s.diagnostics.events_over_worker_cap == 16);  // rank 2's 4 steps × 4 events.
  // The window keeps step numbers 1..3; step 0's cells came first and went.
  CHECK(s.steps_in_window == 3);
  REQUIRE(s.steps.size() == 3);
  CHECK(s.steps.front().step_num == 1);
  CHECK(s.steps.back().cells.size() == 3);  // ranks 0 and 1, and local.
}

TEST_CASE("pod view: each worker's step total and step source, past its summary's window") {
  // liveprof run's hooks name their markers after their source; a program's
  // own liveprof.step markers have its names. worker_steps 2: a summary
  // holds each worker's 2 newest steps, the total counts all 5.
  const std::vector<FakeWorker> workers = {MakeWorker(1), MakeWorker(2)};
  PodViewOptions o;
  o.worker_steps = 2;
  Fed f(o);
  std::vector<Event> defs = Definitions(workers);
  constexpr NameId kOptimizerStep = 30, kOwnStep = 31;
  defs.push_back(test::NameDef(kOptimizerStep, "optimizer step", 14));
  defs.push_back(test::NameDef(kOwnStep, "train", 5));
  f.Definitions(defs);
  std::vector<Event> events = ThreeWorkerEvents(workers, 5);
  for (Event& e : events) {
    if (e.kind == EventKind::kStepMarker) e.name = e.track == workers[0].host ? kOptimizerStep : kOwnStep;
  }
  SortByEnd(&events);
  f.pod.Consume(events);
  f.pod.Flush();
  const PodSnapshot s = f.pod.Snapshot();
  REQUIRE(s.workers.size() == 2);
  for (const PodWorkerSummary& w : s.workers) {
    CHECK(w.steps == 2);
    CHECK(w.steps_total == 5);
  }
  CHECK(s.workers[0].step_source == "optimizer");
  CHECK(s.workers[0].step_marker == "optimizer step");
  CHECK(s.workers[1].step_source == "program marks");
  const std::vector<PodWorkerSummary> sources = f.pod.StepSources();
  REQUIRE(sources.size() == 2);
  CHECK(sources[1].label == "rank 1");
  CHECK(sources[1].steps_total == 5);
  CHECK(sources[1].step_marker == "train");
  CHECK(StepSourceLabel(StepSource::kMarker, "torch.profiler step") == "torch.profiler");
  CHECK(StepSourceLabel(StepSource::kProfilerStep, "ProfilerStep#3") == "torch.profiler");
  CHECK(StepSourceLabel(StepSource::kNamePattern, "iteration 3") == "pattern");
  CHECK(StepSourceLabel(StepSource::kNone, "") == "none");
}

TEST_CASE("pod view: a worker far behind keeps its numbers, is compared and is the straggler") {
  // Ranks 0 and 1 run steps 0..19 at 100 ms; rank 2 runs steps 0..4 at
  // 150 ms and its steps come after theirs: its step numbers have left the
  // window of 5 (rows 15..19) before they arrive. It must not read as a
  // worker with no data: 5 steps, 15 behind, +50 ms against the medians its
  // steps had (100 ms: the archive), and the straggler.
  const std::vector<FakeWorker> workers = {MakeWorker(1), MakeWorker(2), MakeWorker(3)};
  PodViewOptions o;
  o.max_steps = 5;
  Fed f(o);
  f.Definitions(Definitions(workers));
  auto feed = [&](std::vector<Event> events, uint64_t watermark) {
    SortByEnd(&events);
    f.pod.Consume(events);
    f.pod.Advance(watermark);
  };
  for (int64_t n = 0; n < 20; ++n) {  // step by step, as the pipeline feeds it.
    std::vector<Event> events;
    AddStep(&events, workers[0], n, Shape{100, 10, 5, 60}, static_cast<uint32_t>(n + 1));
    AddStep(&events, workers[1], n, Shape{100, 10, 5, 60}, static_cast<uint32_t>(n + 1));
    feed(std::move(events), kT0 + static_cast<uint64_t>(n) * kStepSpacingNs + 5'000'000'000);
  }
  for (int64_t n = 0; n < 5; ++n) {
    std::vector<Event> events;
    const uint64_t shift = 25 * kStepSpacingNs;
    AddStep(&events, workers[2], n, Shape{150, 60, 5, 60}, static_cast<uint32_t>(n + 1), shift);
    feed(std::move(events), kT0 + shift + static_cast<uint64_t>(n) * kStepSpacingNs + 5'000'000'000);
  }
  f.pod.Flush();
  const PodSnapshot s = f.pod.Snapshot();
  REQUIRE(s.steps.size() == 5);
  CHECK(s.steps.front().step_num == 15);
  CHECK(CellOf(s.steps.back(), 3) == nullptr);  // not in the rows...
  CHECK(s.diagnostics.cells_outside_window == 5);
  const PodWorkerSummary& r2 = WorkerById(s, 3);  // ...but in its numbers.
  CHECK(r2.steps == 5);
  CHECK(r2.first_step == 0);
  CHECK(r2.last_step == 4);
  CHECK(r2.behind_steps == 15);
  CHECK_FALSE(r2.common.has_value());  // its steps are older than every row held.
  CHECK(r2.not_common == "behind the held steps");
  CHECK(s.common.workers == 2);
  CHECK(r2.mean_step_ms == 150);
  CHECK(r2.compared_steps == 5);
  CHECK(r2.lag_ms == 50);
  CHECK(r2.lag_pct == 50);
  REQUIRE(r2.straggler_pct.has_value());
  CHECK(*r2.straggler_pct == 50);
  REQUIRE(s.straggler.has_value());
  CHECK(s.straggler->worker == 3);
  CHECK(s.straggler->label == "rank 2");
  CHECK(s.straggler->pct == 50);
  CHECK(s.straggler->first_step == 2);
  CHECK(s.straggler->last_step == 4);
  // The ranks in step: each other's reference (two cells), 0 behind.
  const PodWorkerSummary& r0 = WorkerById(s, 1);
  CHECK(r0.behind_steps == 0);
  CHECK(r0.steps == 20);
  CHECK(r0.lag_ms == 0);
  CHECK(r0.compared_steps == 20);

  // Rank 2 stops; the others go on for more than a window of steps each
  // (5 × 3 workers = 15 cells): it is listed still, but no straggler.
  for (int64_t n = 20; n < 30; ++n) {
    std::vector<Event> events;
    AddStep(&events, workers[0], n, Shape{100, 10, 5, 60}, static_cast<uint32_t>(n + 1));
    AddStep(&events, workers[1], n, Shape{100, 10, 5, 60}, static_cast<uint32_t>(n + 1));
    feed(std::move(events), kT0 + 25 * kStepSpacingNs + static_cast<uint64_t>(n) * kStepSpacingNs);
  }
  f.pod.Flush();
  const PodSnapshot later = f.pod.Snapshot();
  CHECK(WorkerById(later, 3).steps == 5);
  CHECK(WorkerById(later, 3).behind_steps == 25);
  CHECK_FALSE(WorkerById(later, 3).straggler_pct.has_value());
  REQUIRE(later.straggler.has_value());
  CHECK(later.straggler->worker != 3);
  CHECK(later.straggler->pct == 0);
}

// Feeds step n of every worker to the analyses and closes it.
void FeedStep(Analyses& a, const std::vector<FakeWorker>& workers, int64_t n, bool slow) {
  std::vector<Event> events;
  for (const FakeWorker& w : workers) {
    const bool straggles = slow && w.process == 3;
    AddStep(&events, w, n, straggles ? Shape{150, 10, 5, 60} : Shape{100, 10, 5, 60}, static_cast<uint32_t>(n + 1));
  }
  SortByEnd(&events);
  const uint64_t watermark = kT0 + static_cast<uint64_t>(n) * kStepSpacingNs + 5'000'000'000;
  a.Consume({}, events, {}, watermark, watermark);
}

std::vector<AlertEvent> StragglerEvents(Analyses& a) {
  std::vector<AlertEvent> out;
  for (AlertEvent& e : a.TakeAlertEvents()) {
    if (e.rule == "straggler") out.push_back(std::move(e));
  }
  return out;
}

TEST_CASE("pod view: the straggler rule fires after 3 slow steps, names the worker, resolves") {
  const std::vector<FakeWorker> workers = {MakeWorker(1), MakeWorker(2), MakeWorker(3)};
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  a.Consume(Definitions(workers), {}, {}, 0, 0);
  // Rank 2 takes 150 ms instead of 100 at steps 2, 3 and 4: +50 % over the median.
  for (int64_t n = 0; n < 4; ++n) {
    FeedStep(a, workers, n, n >= 2);
    CHECK(StragglerEvents(a).empty());  // its last 3 steps are not all slow yet.
  }
  FeedStep(a, workers, 4, true);
  std::vector<AlertEvent> fired = StragglerEvents(a);
  REQUIRE(fired.size() == 1);
  CHECK(fired[0].state == AlertEventState::kFiring);
  CHECK(fired[0].value == 50);
  CHECK(fired[0].worker == "rank 2");
  CHECK(fired[0].first_step == 2);
  CHECK(fired[0].last_step == 4);
  CHECK(fired[0].summary ==
        "Straggler: rank 2 is at least 50% slower than the median worker in each of its last 3 "
        "steps (threshold 20%)");
  // Back to 100 ms: resolve_after 3 clear evaluations, one per step here.
  FeedStep(a, workers, 5, false);
  FeedStep(a, workers, 6, false);
  CHECK(StragglerEvents(a).empty());
  const auto view = nlohmann::json::parse(a.Render(RenderOptions{}).alerts);
  bool firing = false;
  for (const auto& f : view["firing"]) firing |= f["rule"] == "straggler" && f["worker"] == "rank 2";
  CHECK(firing);
  FeedStep(a, workers, 7, false);
  const std::vector<AlertEvent> resolved = StragglerEvents(a);
  REQUIRE(resolved.size() == 1);
  CHECK(resolved[0].state == AlertEventState::kResolved);
  CHECK(resolved[0].worker == "rank 2");
  CHECK(resolved[0].value == 0);
}

TEST_CASE("pod view in the pipeline: one process's steps are the steps view's, then a second joins") {
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  const FakeWorker local{0, 0, 1, 2};  // undefined tracks: process 0.
  const std::vector<FakeWorker> remote = {MakeWorker(1)};
  auto feed = [&](int64_t n, bool with_remote) {
    std::vector<Event> events;
    AddStep(&events, local, n, {100 + static_cast<uint64_t>(n), 10, 5, 60}, static_cast<uint32_t>(n + 1));
    if (with_remote) AddStep(&events, remote[0], n, {120, 10, 5, 60}, static_cast<uint32_t>(n + 1));
    SortByEnd(&events);
    const uint64_t watermark = kT0 + static_cast<uint64_t>(n) * kStepSpacingNs + 5'000'000'000;
    a.Consume(n == 4 ? Definitions(remote) : std::vector<Event>{}, events, {}, watermark, watermark);
  };
  for (int64_t n = 0; n < 4; ++n) feed(n, false);
  CHECK(a.pod().shares_local_steps());  // one process: its steps are assembled once.
  const auto alone = nlohmann::json::parse(a.Render(RenderOptions{}).pod);
  const auto steps = nlohmann::json::parse(a.Render(RenderOptions{}).steps);
  REQUIRE(alone["steps"].size() == 4);
  REQUIRE(steps["rows"].size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(alone["steps"][i]["cells"][0]["step_ms"] == steps["rows"][i]["step_ms"]);
    CHECK(alone["steps"][i]["cells"][0]["ms"] == steps["rows"][i]["ms"]);
  }
  for (int64_t n = 4; n < 7; ++n) feed(n, true);
  CHECK_FALSE(a.pod().shares_local_steps());
  const auto both = nlohmann::json::parse(a.Render(RenderOptions{}).pod);
  REQUIRE(both["workers"].size() == 2);
  CHECK(both["workers"][0]["label"] == "local");
  CHECK(both["workers"][0]["steps"] == 7);  // 4 from the pipeline's rows, 3 of its own.
  CHECK(both["workers"][1]["steps"] == 3);
  CHECK(both["steps"][6]["cells"][0]["step_ms"] == 106.0);
  CHECK(both["steps"][6]["cells"][0]["ms"] == nlohmann::json::parse("[60,0,0,0,5,10,0,0,31]"));
  CHECK(both["steps"][6]["worst"] == 1);
}

TEST_CASE("pod view: the JSON view model carries the values") {
  const std::vector<FakeWorker> workers = {MakeWorker(1), MakeWorker(2), MakeWorker(3)};
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  const std::vector<Event> events = ThreeWorkerEvents(workers, 4);
  a.Consume(Definitions(workers), events, {}, events.back().end(), events.back().end());
  a.Flush(events.back().end());
  const RenderedViews v = a.Render(RenderOptions{});
  const auto j = nlohmann::json::parse(v.pod);
  CHECK(j["type"] == "pod");
  CHECK(j["v"] == kViewProtocolVersion);
  CHECK(j["seq"] == v.seq);
  CHECK(j["window_steps"] == 200);
  CHECK(j["straggler_steps"] == 3);
  CHECK(j["buckets"].size() == kBucketCount);
  CHECK(j["buckets"][5] == "input");
  CHECK(j["bucket_names"][5] == "Input");
  REQUIRE(j["workers"].size() == 3);
  const auto& r2 = j["workers"][2];
  CHECK(r2["id"] == 3);
  CHECK(r2["label"] == "rank 2");
  CHECK(r2["steps"] == 4);
  CHECK(r2["mean_step_ms"] == 145.0);
  CHECK(r2["mean_ms"][5] == 55.0);
  CHECK(r2["worst_count"] == 3);
  CHECK(r2["lag_ms"] == 37.5);
  CHECK(r2["straggler_pct"].get<double>() == doctest::Approx(4000.0 / 110));
  CHECK(j["workers"][0]["straggler_pct"].get<double>() == doctest::Approx(-1000.0 / 110));
  REQUIRE(j["steps"].size() == 4);
  const auto& step3 = j["steps"][3];
  CHECK(step3["step"] == 3);
  CHECK(step3["median_ms"] == 110.0);
  CHECK(step3["worst"] == 3);
  REQUIRE(step3["cells"].size() == 3);
  CHECK(step3["cells"][2]["worker"] == 3);
  CHECK(step3["cells"][2]["step_ms"] == 170.0);
  CHECK(step3["cells"][2]["ms"] == nlohmann::json::parse("[60,0,0,0,5,80,0,0,25]"));
  CHECK(j["straggler"]["worker"] == 3);
  CHECK(j["straggler"]["label"] == "rank 2");
  CHECK(j["straggler"]["first_step"] == 1);
  CHECK(j["straggler"]["last_step"] == 3);
  CHECK(j["diagnostics"]["steps_without_compute"] == 0);

  // A single-process run: one worker, "local", no straggler.
  Analyses local(AnalysesOptions{}, &diag);
  std::vector<Event> mine;
  for (int64_t n = 0; n < 3; ++n)
    AddStep(&mine, FakeWorker{0, 0, 1, 2}, n, {100, 10, 5, 60}, static_cast<uint32_t>(n + 1));
  SortByEnd(&mine);
  local.Consume({}, mine, {}, mine.back().end(), mine.back().end());
  local.Flush(mine.back().end());
  const auto l = nlohmann::json::parse(local.Render(RenderOptions{}).pod);
  REQUIRE(l["workers"].size() == 1);
  CHECK(l["workers"][0]["label"] == "local");
  CHECK(l["workers"][0]["steps"] == 3);
  CHECK(l["steps"][0]["worst"].is_null());
  CHECK(l["straggler"].is_null());
}

}  // namespace
}  // namespace liveprof::pod_view_test
