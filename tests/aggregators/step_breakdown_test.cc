// Steps and the step-time breakdown: hand-computed fixtures for every bucket,
// both modes, step assembly edge cases, and incremental == batch on random
// streams against a per-nanosecond reference.
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "aggregators/catalog.h"
#include "aggregators/steps/step_breakdown.h"
#include "aggregators/steps/steps.h"
#include "doctest/doctest.h"
#include "event_builder.h"
#include "stream/reorder_buffer.h"

namespace liveprof::step_breakdown_test {
namespace {

using test::Copy;
using test::Input;
using test::Kernel;
using test::Launch;
using test::Op;

enum : NameId {
  kTrain = 1,
  kGetNext,
  kLaunchKernel,
  kMatmul,
  kNccl,
  kHalfGemm,
  kDenseOp,
  kSync,
  kMemcpyAsync,
  kModelForward,
  kModelBackward,
  kNameCount
};

Catalog MakeCatalog() {
  Catalog c;
  const char* names[] = {"",
                         "train",
                         "IteratorGetNext",
                         "cudaLaunchKernel",
                         "matmul_kernel",
                         "ncclAllReduceKernel",
                         "half_gemm",
                         "model/dense/MatMul:MatMul",
                         "cudaStreamSynchronize",
                         "cudaMemcpyAsync",
                         "nn.Module.forward: Net",
                         "autograd.backward"};
  for (NameId i = 0; i < kNameCount; ++i) c.DefineName(i, names[i]);
  return c;
}

void SortCompletion(std::vector<Event>* v) { std::stable_sort(v->begin(), v->end(), CompletionOrderLess); }

Event Marker(uint64_t ts, uint64_t dur, int64_t n) {
  Event e = test::Step(ts, dur, n, 1);
  e.name = kTrain;
  return e;
}

// One step [0, 1000) with every bucket; times in ns. The sweep, by hand:
//   [0,200)   input span (11) over launch corr4 (9) and H2D (8) → input 200
//   [200,250) host op (1) + H2D (8)                            → H2D 50
//   [250,300) host op                                          → host compute 50
//   [300,350) three launches (9)                               → kernel launch 50
//   [350,600) matmul (14)                                      → compute32 250
//   [600,700) half_gemm (15), nccl from 650                    → compute16 100
//   [700,800) nccl (10)                                        → collectives 100
//   [800,850) D2H (13)                                         → output 50
//   [850,1000) nothing                                         → all others 150
std::vector<Event> FixtureStep() {
  std::vector<Event> v = {
      Marker(0, 1000, 7),
      Input(0, 200, kGetNext),
      Op(200, 100, kDenseOp),
      Launch(100, 10, 4, kMemcpyAsync),
      Launch(300, 20, 1, kLaunchKernel),
      Launch(320, 20, 2, kLaunchKernel),
      Launch(340, 10, 3, kLaunchKernel),
      Launch(360, 5, 5, kMemcpyAsync),
      Copy(EventKind::kMemcpyHtoD, 150, 100, 4096, 4),
      Kernel(350, 250, kMatmul, 1),
      Kernel(600, 100, kHalfGemm, 2),
      Kernel(650, 150, kNccl, 3),
      Copy(EventKind::kMemcpyDtoH, 800, 50, 128, 5),
  };
  SortCompletion(&v);
  return v;
}

std::vector<StepRecord> Assemble(const Catalog& c, const std::vector<Event>& events, Diagnostics* diag,
                                 StepAssembler::Options o = {}) {
  StepAssembler a(&c, diag, o);
  a.Consume(events);
  a.Flush();
  return a.TakeClosed();
}

size_t B(Bucket b) { return static_cast<size_t>(b); }

TEST_CASE("steps: events waiting longer than max_step_ns with no marker leave as stepless, oldest first") {
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  StepAssembler::Options o;
  o.max_step_ns = 1000;
  StepAssembler a(&c, &diag, o);
  // Spans ending at 105, 205, ... 505; no marker.
  std::vector<Event> v;
  for (uint64_t i = 1; i <= 5; ++i) v.push_back(test::Span(100 * i, 5, 0, 1));
  a.Consume(v);
  a.Advance(1000);  // (the limit is 0: nothing is that old)
  CHECK(a.pending_events() == 5);
  a.Advance(1200);  // limit 200: the span ending at 105 goes.
  CHECK(a.pending_events() == 4);
  CHECK(diag.Get(Diag::events_without_step) == 1);
  a.Advance(1204);  // limit 204: the next ends at 205, stays.
  CHECK(a.pending_events() == 4);
  a.Consume(std::vector<Event>{test::Span(50, 100, 0, 1)});  // a late one, ending at 150.
  a.Advance(1300);                                           // limit 300: it and the one ending at 205 go.
  CHECK(a.pending_events() == 3);
  CHECK(diag.Get(Diag::events_without_step) == 3);
  a.Advance(2000);  // limit 1000: all of them.
  CHECK(a.pending_events() == 0);
  CHECK(diag.Get(Diag::events_without_step) == 6);
}

TEST_CASE("steps: the waiting list is bounded, the oldest half leaves as stepless, counted") {
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  StepAssembler::Options o;
  o.max_waiting_events = 8;
  StepAssembler a(&c, &diag, o);
  // Nine host spans and no marker: all wait, one too many.
  std::vector<Event> v;
  for (uint64_t i = 0; i < 9; ++i) v.push_back(test::Span(10 * i, 5, 0, 1));
  a.Consume(v);
  CHECK(a.pending_events() == 4);  // 9 - (9 - 8/2) = the newest 4.
  CHECK(diag.Get(Diag::events_without_step) == 5);
  // The newest wait on and find their step when its marker comes.
  const Event marker = test::Step(50, 50, 3, 1);
  a.Consume(std::span(&marker, 1));
  a.Flush();
  const std::vector<StepRecord> closed = a.TakeClosed();
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].host_spans.size() == 4);
}

TEST_CASE("step breakdown: a stream out of completion order gives the same buckets") {
  // The breakdown walks each step's spans by descending end; spans that did
  // not arrive in order of end are sorted first. Reversed, the fixture must
  // give what it gives in completion order, and every kernel must still join
  // through its launch although it arrives before it.
  const Catalog c = MakeCatalog();
  std::vector<Event> reversed = FixtureStep();
  const Event marker = reversed.back();  // the marker ends last.
  reversed.pop_back();
  std::reverse(reversed.begin(), reversed.end());
  reversed.push_back(marker);
  Diagnostics d1, d2;
  const auto in_order = Assemble(c, FixtureStep(), &d1);
  const auto out_of_order = Assemble(c, reversed, &d2);
  REQUIRE(in_order.size() == 1);
  REQUIRE(out_of_order.size() == 1);
  CHECK_FALSE(std::is_sorted(out_of_order[0].host_spans.begin(), out_of_order[0].host_spans.end(),
                             [](const StepSpan& a, const StepSpan& b) { return a.end < b.end; }));
  CHECK(out_of_order[0].device_by_corr == 5);
  CHECK(out_of_order[0].device_by_time == 0);
  CHECK(d2.Get(Diag::device_without_launch) == 0);
  bool ok1 = false, ok2 = false;
  const StepBreakdownRow a = ComputeStepBreakdown(in_order[0], BreakdownMode::kHostAndDevice, true, &ok1);
  const StepBreakdownRow b = ComputeStepBreakdown(out_of_order[0], BreakdownMode::kHostAndDevice, true, &ok2);
  CHECK(ok1);
  CHECK(ok2);
  CHECK(a.type_ns == b.type_ns);
  CHECK(a.bucket_ns == b.bucket_ns);
  CHECK(a.device_busy_ns == b.device_busy_ns);
  CHECK(b.bucket_ns[static_cast<size_t>(Bucket::kInput)] == 250);
}

TEST_CASE("step breakdown: every bucket by hand, host+device mode") {
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  const auto steps = Assemble(c, FixtureStep(), &diag);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].step_num == 7);
  CHECK(steps[0].host_spans.size() == 7);
  CHECK(steps[0].device_spans.size() == 5);
  CHECK(steps[0].device_by_corr == 5);
  bool ok = false;
  const StepBreakdownRow r = ComputeStepBreakdown(steps[0], BreakdownMode::kHostAndDevice, true, &ok);
  CHECK(ok);
  CHECK(r.begin_ns == 0);
  CHECK(r.end_ns == 1000);
  CHECK(r.bucket_ns[B(Bucket::kInput)] == 250);  // wait 200 + H2D 50.
  CHECK(r.bucket_ns[B(Bucket::kHostCompute)] == 50);
  CHECK(r.bucket_ns[B(Bucket::kKernelLaunch)] == 50);
  CHECK(r.bucket_ns[B(Bucket::kDeviceCompute)] == 350);
  CHECK(r.bucket_ns[B(Bucket::kDeviceCollectives)] == 100);
  CHECK(r.bucket_ns[B(Bucket::kOutput)] == 50);
  CHECK(r.bucket_ns[B(Bucket::kDeviceToDevice)] == 0);
  CHECK(r.bucket_ns[B(Bucket::kCompilation)] == 0);
  CHECK(r.bucket_ns[B(Bucket::kAllOthers)] == 150);
  CHECK(r.type_ns[static_cast<size_t>(SpanType::kDeviceCompute16)] == 100);
  CHECK(r.type_ns[static_cast<size_t>(SpanType::kDeviceCompute32)] == 250);
  CHECK(r.work.h2d_count == 1);
  CHECK(r.work.h2d_bytes == 4096);
  CHECK(r.work.d2h_count == 1);
  CHECK(r.work.kernel_count == 3);
  CHECK(r.device_busy_ns == 600);  // [150,250) ∪ [350,850).
}

TEST_CASE("step breakdown: a CPU step with only liveprof run's model passes: the rest is host compute") {
  // liveprof run's forward and backward spans (src/python/liveprof/_model.py)
  // are host compute but no annotation of the program's: what input and they
  // leave (the optimizer's step, the loss, Python) is host compute too, not
  // "All others" (which would read as POTENTIALLY input-bound). A program's
  // own op beside them makes the step annotated again.
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  std::vector<Event> v = {Marker(0, 100, 1),          Input(0, 20, kGetNext),      Op(20, 30, kModelForward),
                          Op(50, 35, kModelBackward), Marker(100, 100, 2),         Input(100, 20, kGetNext),
                          Op(120, 30, kModelForward), Op(150, 35, kModelBackward), Op(185, 5, kDenseOp)};
  SortCompletion(&v);
  StepBreakdown sb(&diag, {});
  const auto steps = Assemble(c, v, &diag);
  REQUIRE(steps.size() == 2);
  CHECK_FALSE(steps[0].annotated_host_compute);
  CHECK(steps[1].annotated_host_compute);
  sb.Consume(steps);
  REQUIRE(sb.rows().size() == 2);
  const StepBreakdownRow& passes = sb.rows()[0];
  CHECK(passes.bucket_ns[B(Bucket::kInput)] == 20);
  CHECK(passes.bucket_ns[B(Bucket::kHostCompute)] == 80);  // forward 30 + backward 35 + the rest 15.
  CHECK(passes.bucket_ns[B(Bucket::kAllOthers)] == 0);
  const StepBreakdownRow& own_op = sb.rows()[1];
  CHECK(own_op.bucket_ns[B(Bucket::kHostCompute)] == 70);  // 30 + 35 + the program's op 5.
  CHECK(own_op.bucket_ns[B(Bucket::kAllOthers)] == 10);
  CHECK(IsModelPassName("nn.Module.forward: Net"));
  CHECK(IsModelPassName("autograd.grad"));
  CHECK_FALSE(IsModelPassName("nn.Module: Net"));  // (level 3's, ignored by the breakdown altogether)
}

TEST_CASE("step breakdown: device-only mode uses the device span") {
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  const auto steps = Assemble(c, FixtureStep(), &diag);
  bool ok = false;
  const StepBreakdownRow r = ComputeStepBreakdown(steps[0], BreakdownMode::kDeviceOnly, true, &ok);
  CHECK(ok);
  // Span [150, 850): H2D 100, gap 100, compute32 250, compute16 100, nccl 100, D2H 50.
  CHECK(r.step_ns() == 700);
  CHECK(r.bucket_ns[B(Bucket::kInput)] == 100);
  CHECK(r.bucket_ns[B(Bucket::kAllOthers)] == 100);
  CHECK(r.bucket_ns[B(Bucket::kDeviceCompute)] == 350);
  CHECK(r.bucket_ns[B(Bucket::kKernelLaunch)] == 0);
  CHECK(r.bucket_ns[B(Bucket::kHostCompute)] == 0);
}

TEST_CASE("step breakdown: CPU-only steps use host compute, one without any, its unclaimed time") {
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  // Step 1 has an op: its unclaimed time is All others. Steps 2 and 3 have
  // none (an unannotated job: steps and input only): what input leaves is
  // host compute, and every step keeps its row.
  std::vector<Event> v = {Marker(0, 100, 1),       Input(0, 40, kGetNext),    Op(50, 30, kDenseOp),
                          Marker(100, 100, 2),     Input(100, 100, kGetNext), Marker(200, 100, 3),
                          Input(200, 25, kGetNext)};
  SortCompletion(&v);
  StepBreakdown sb(&diag, {});
  const auto steps = Assemble(c, v, &diag);
  REQUIRE(steps.size() == 3);
  sb.Consume(steps);
  REQUIRE(sb.rows().size() == 3);
  const StepBreakdownRow& r = sb.rows()[0];
  CHECK(r.bucket_ns[B(Bucket::kInput)] == 40);
  CHECK(r.bucket_ns[B(Bucket::kHostCompute)] == 30);
  CHECK(r.bucket_ns[B(Bucket::kAllOthers)] == 30);
  const StepBreakdownRow& all_input = sb.rows()[1];
  CHECK(all_input.bucket_ns[B(Bucket::kInput)] == 100);
  CHECK(all_input.bucket_ns[B(Bucket::kHostCompute)] == 0);
  CHECK(all_input.bucket_ns[B(Bucket::kAllOthers)] == 0);
  const StepBreakdownRow& unannotated = sb.rows()[2];
  CHECK(unannotated.bucket_ns[B(Bucket::kInput)] == 25);
  CHECK(unannotated.bucket_ns[B(Bucket::kHostCompute)] == 75);
  CHECK(unannotated.bucket_ns[B(Bucket::kAllOthers)] == 0);
  CHECK(diag.Get(Diag::step_without_compute) == 0);
}

TEST_CASE("steps: a GPU tail joins its step by correlation, stray work is counted") {
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  std::vector<Event> v = {
      Marker(0, 100, 1),
      Launch(10, 5, 1, kLaunchKernel),
      Kernel(20, 150, kMatmul, 1),  // runs past the host step: still step 1.
      Marker(200, 100, 2),
      Op(150, 20, kDenseOp),         // between the steps' markers: in no step.
      Kernel(210, 10, kMatmul, 99),  // launch never seen: by time, step 2.
      Launch(220, 5, 2, kLaunchKernel),
      Kernel(230, 20, kMatmul, 2),
  };
  SortCompletion(&v);
  const auto steps = Assemble(c, v, &diag);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].device_end_ns == 170);
  CHECK(steps[0].device_by_corr == 1);
  CHECK(steps[1].device_by_corr == 1);
  CHECK(steps[1].device_by_time == 1);
  CHECK(diag.Get(Diag::device_without_launch) == 1);
  CHECK(diag.Get(Diag::events_without_step) == 1);
  bool ok = false;
  // The host marker [0,100) does not contain the device span [20,170): the
  // device span is the step (docs/semantics-tf.md §2.4).
  const StepBreakdownRow r = ComputeStepBreakdown(steps[0], BreakdownMode::kHostAndDevice, true, &ok);
  CHECK(r.begin_ns == 20);
  CHECK(r.end_ns == 170);
}

TEST_CASE("steps: work launched before the first step is stepless, not launchless") {
  // A model's weights copied to the GPU before training: the launch was
  // seen (stepless); its device work is stepless too, not "without launch"
  // (an H200 PyTorch run counted its 6 parameter copies so).
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  std::vector<Event> v = {
      Launch(2, 3, 7, kLaunchKernel),  Kernel(6, 4, kMatmul, 7),   Marker(20, 100, 1),
      Launch(30, 5, 8, kLaunchKernel), Kernel(40, 10, kMatmul, 8), Marker(200, 100, 2),
  };
  SortCompletion(&v);
  const auto steps = Assemble(c, v, &diag);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].device_by_corr == 1);
  CHECK(steps[0].device_by_time == 0);
  CHECK(diag.Get(Diag::device_without_launch) == 0);
  CHECK(diag.Get(Diag::events_without_step) == 2);  // the launch and its kernel.
}

TEST_CASE("steps: work for a closed step is late, ProfilerStep#N and name patterns") {
  Catalog c = MakeCatalog();
  c.DefineName(20, "ProfilerStep#41");
  c.DefineName(21, "ProfilerStep#42");
  c.DefineName(22, "train_step 9");
  Diagnostics diag;
  StepAssembler a(&c, &diag, {});
  std::vector<Event> v = {test::Span(0, 100, 20, 1), Launch(10, 5, 1, kLaunchKernel), Kernel(20, 30, kMatmul, 1),
                          test::Span(100, 100, 21, 1)};
  SortCompletion(&v);
  a.Consume(v);
  a.Advance(200);  // step 41 has a successor and no outstanding launch: closed.
  auto closed = a.TakeClosed();
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].step_num == 41);
  CHECK(a.source() == StepSource::kProfilerStep);
  const Event late = Kernel(30, 200, kMatmul, 1);  // a second kernel of corr 1.
  a.Consume(std::span(&late, 1));
  CHECK(diag.Get(Diag::late_for_step) == 1);

  Diagnostics d2;
  StepAssembler p(&c, &d2, {.name_pattern = "train_step {n}"});
  const Event m = test::Span(0, 50, 22, 1);
  p.Consume(std::span(&m, 1));
  p.Flush();
  closed = p.TakeClosed();
  REQUIRE(closed.size() == 1);
  CHECK(closed[0].step_num == 9);
  CHECK(p.source() == StepSource::kNamePattern);
  int64_t n = -1;
  CHECK(MatchStepPattern("*/step_{n}", "model/step_12", &n));
  CHECK(n == 12);
  n = -1;
  CHECK(MatchStepPattern("train*", "train_loop", &n));
  CHECK(n == -1);
  CHECK_FALSE(MatchStepPattern("step_{n}", "step_x", &n));
  CHECK_FALSE(MatchStepPattern("train", "train_loop", &n));
}

TEST_CASE("steps: a runtime and a driver record of one launch wait for one kernel") {
  // CUPTI with RUNTIME and DRIVER on: cudaLaunchKernel and the cuLaunchKernel
  // inside it carry the same correlation id. The step must not wait for two.
  Catalog c = MakeCatalog();
  c.DefineName(20, "ProfilerStep#1");
  c.DefineName(21, "ProfilerStep#2");
  c.DefineName(22, "cuLaunchKernel");
  Diagnostics diag;
  StepAssembler a(&c, &diag, {});
  std::vector<Event> v = {test::Span(0, 100, 20, 1), Launch(10, 10, 7, kLaunchKernel), Launch(12, 6, 7, 22),
                          Kernel(30, 20, kMatmul, 7), test::Span(100, 100, 21, 1)};
  SortCompletion(&v);
  a.Consume(v);
  a.Advance(250);  // long before the 2 s close lag.
  auto closed = a.TakeClosed();
  REQUIRE(closed.size() == 1);
  CHECK_FALSE(closed[0].closed_by_timeout);
  CHECK(closed[0].host_spans.size() == 2);  // both API spans are kept.
  CHECK(closed[0].device_by_corr == 1);
}

TEST_CASE("steps: a bad duration is counted and left out") {
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  std::vector<Event> v = {Op(10, ~uint64_t{0} - 5, kDenseOp), Marker(0, 100, 1), Op(10, 20, kDenseOp)};
  const auto steps = Assemble(c, v, &diag);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].host_spans.size() == 1);
  CHECK(diag.Get(Diag::bad_duration) == 1);
}

TEST_CASE("step window: ratios of sums, σ, median, last N and last T") {
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  // Three CPU-only steps of 100, 200, 400 ns; input 10, 100, 0.
  std::vector<Event> v = {Marker(0, 100, 1),   Input(0, 10, kGetNext),    Op(10, 90, kDenseOp),
                          Marker(100, 200, 2), Input(100, 100, kGetNext), Op(200, 100, kDenseOp),
                          Marker(400, 400, 3), Op(400, 400, kDenseOp)};
  SortCompletion(&v);
  StepBreakdown sb(&diag, {});
  sb.Consume(Assemble(c, v, &diag));
  const StepWindow all = sb.Window({});
  CHECK(all.steps == 3);
  CHECK(all.step_ns_sum == 700);
  CHECK(all.pct(Bucket::kInput) == doctest::Approx(100.0 * 110 / 700));
  CHECK(all.step_ms_median == doctest::Approx(200e-6));
  CHECK(all.step_ms.stddev() == doctest::Approx(152.7525e-6).epsilon(1e-6));  // σ of 100,200,400 ns.
  CHECK(all.gap_ns == 100);                                                   // 300 → 400.
  const StepWindow last2 = sb.Window({.last_steps = 2});
  CHECK(last2.first_step == 2);
  CHECK(last2.pct(Bucket::kInput) == doctest::Approx(100.0 * 100 / 600));
  const StepWindow last_t = sb.Window({.last_ns = 400});  // ends ≥ 800 − 400.
  CHECK(last_t.steps == 1);
  CHECK(last_t.last_step == 3);
}

TEST_CASE("step window: a snapshot carries at most graph_rows rows, the newest, and counts the rest") {
  const Catalog c = MakeCatalog();
  Diagnostics diag;
  std::vector<Event> v = {Marker(0, 100, 1),      Op(0, 100, kDenseOp), Marker(100, 200, 2),
                          Op(100, 200, kDenseOp), Marker(400, 400, 3),  Op(400, 400, kDenseOp)};
  SortCompletion(&v);
  StepBreakdown::Options o;
  o.graph_rows = 2;
  StepBreakdown sb(&diag, o);
  sb.Consume(Assemble(c, v, &diag));
  const StepBreakdownSnapshot all = sb.Snapshot({});
  CHECK(all.window.steps == 3);   // the window: every step.
  REQUIRE(all.rows.size() == 2);  // the graph: the newest two, and says so.
  CHECK(all.rows.front().step_num == 2);
  CHECK(all.rows_left_out == 1);
  CHECK(all.rows_cap == 2);
  const StepBreakdownSnapshot last2 = sb.Snapshot({.last_steps = 2});
  CHECK(last2.rows.size() == 2);
  CHECK(last2.rows_left_out == 0);
  CHECK(StepBreakdown::Options{}.graph_rows == 1000);  // the dashboard's "last 1000 steps", whole.
}

// ---- incremental == batch on random streams -------------------------------

struct Gen {
  std::vector<Event> events;
  size_t steps = 0;
};

// Random steps on one host thread with launches and their device work (which
// may run past the step's end), device work without a launch, input spans and
// nested ops. Times are small so the reference can walk every nanosecond.
Gen Generate(uint32_t seed) {
  std::mt19937 rng(seed);
  auto U = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
  Gen g;
  uint64_t t = U(0, 20);
  uint32_t corr = 1;
  g.steps = U(2, 6);
  for (size_t s = 0; s < g.steps; ++s) {
    const uint64_t len = U(60, 200);
    const uint64_t b = t, e = t + len;
    g.events.push_back(Marker(b, len, static_cast<int64_t>(s)));
    const uint64_t in = U(0, len / 3);
    if (in > 0) g.events.push_back(Input(b, in, kGetNext));
    uint64_t cursor = b + in;
    while (cursor + 12 < e) {
      const uint64_t d = U(2, std::min<uint64_t>(30, e - cursor - 1));
      switch (U(0, 3)) {
        case 0: g.events.push_back(Op(cursor, d, kDenseOp)); break;
        default: {
          const uint32_t id = corr++;
          g.events.push_back(Launch(cursor, d, id, kLaunchKernel));
          const uint64_t kb = cursor + d + U(0, 20);
          const NameId k = U(0, 2) == 0 ? kHalfGemm : (U(0, 4) == 0 ? kNccl : kMatmul);
          if (U(0, 5) == 0) {
            g.events.push_back(
                Copy(U(0, 1) ? EventKind::kMemcpyHtoD : EventKind::kMemcpyDtoH, kb, U(1, 40), 64, id, 101));
          } else {
            g.events.push_back(Kernel(kb, U(1, 60), k, id, 100 + U(0, 1)));
          }
        }
      }
      cursor += d + U(0, 4);
    }
    t = e + U(0, 10);
  }
  SortCompletion(&g.events);
  return g;
}

// The reference: membership by brute force, then the highest type covering
// each nanosecond of the span.
std::vector<StepBreakdownRow> Reference(const Catalog& c, const std::vector<Event>& events, BreakdownMode mode) {
  std::vector<Event> markers;
  std::map<uint32_t, size_t> launch_step;
  for (const Event& e : events)
    if (e.kind == EventKind::kStepMarker) markers.push_back(e);
  std::sort(markers.begin(), markers.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
  struct RefStep {
    int64_t step_num = 0;
    uint64_t host_begin_ns = 0, host_end_ns = 0, device_begin_ns = 0, device_end_ns = 0;
    std::vector<Event> host_events, device_events;
  };
  std::vector<RefStep> steps(markers.size());
  auto host_step = [&](uint64_t ts) -> int {
    for (size_t i = 0; i < markers.size(); ++i)
      if (markers[i].ts <= ts && ts < markers[i].end()) return static_cast<int>(i);
    return -1;
  };
  for (const Event& e : events) {
    if (e.kind == EventKind::kRuntimeApi) {
      const int s = host_step(e.ts);
      if (s >= 0) launch_step[e.corr] = static_cast<size_t>(s);
    }
  }
  for (size_t i = 0; i < markers.size(); ++i) {
    steps[i].step_num = markers[i].payload.step.step_num;
    steps[i].host_begin_ns = markers[i].ts;
    steps[i].host_end_ns = markers[i].end();
  }
  for (const Event& e : events) {
    if (IsHostSpanKind(e.kind) && e.kind != EventKind::kStepMarker) {
      const int s = host_step(e.ts);
      if (s >= 0) steps[static_cast<size_t>(s)].host_events.push_back(e);
    } else if (IsDeviceKind(e.kind)) {
      auto it = launch_step.find(e.corr);
      if (it == launch_step.end()) continue;
      RefStep& r = steps[it->second];
      r.device_begin_ns = r.device_events.empty() ? e.ts : std::min(r.device_begin_ns, e.ts);
      r.device_end_ns = std::max(r.device_end_ns, e.end());
      r.device_events.push_back(e);
    }
  }
  std::vector<StepBreakdownRow> rows;
  for (const RefStep& s : steps) {
    bool compute = false;
    for (const Event& e : s.device_events) {
      const SpanType t = ClassifyDeviceEvent(e, c.Name(e.name));
      compute = compute || t == SpanType::kDeviceCompute16 || t == SpanType::kDeviceCompute32;
    }
    if (!compute) continue;  // xprof drops steps without device compute.
    StepBreakdownRow r;
    r.step_num = s.step_num;
    const bool contains = s.host_begin_ns <= s.device_begin_ns && s.device_end_ns <= s.host_end_ns;
    r.begin_ns = mode == BreakdownMode::kHostAndDevice && contains ? s.host_begin_ns : s.device_begin_ns;
    r.end_ns = mode == BreakdownMode::kHostAndDevice && contains ? s.host_end_ns : s.device_end_ns;
    for (uint64_t t = r.begin_ns; t < r.end_ns; ++t) {
      int best = 0;
      for (const Event& e : s.device_events) {
        if (e.ts <= t && t < e.end()) best = std::max(best, static_cast<int>(ClassifyDeviceEvent(e, c.Name(e.name))));
      }
      if (mode == BreakdownMode::kHostAndDevice) {
        for (const Event& e : s.host_events) {
          bool ignore = false;
          const int ty = static_cast<int>(ClassifyHostEvent(e, c.Name(e.name), true, &ignore));
          if (!ignore && e.ts <= t && t < e.end()) best = std::max(best, ty);
        }
      }
      ++r.type_ns[static_cast<size_t>(best)];
    }
    rows.push_back(r);
  }
  return rows;
}

TEST_CASE("step breakdown: incremental equals batch and the per-nanosecond reference") {
  const Catalog c = MakeCatalog();
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const Gen g = Generate(seed);
    for (BreakdownMode mode : {BreakdownMode::kHostAndDevice, BreakdownMode::kDeviceOnly}) {
      CAPTURE(seed);
      CAPTURE(static_cast<int>(mode));
      const auto ref = Reference(c, g.events, mode);
      // Incremental: random chunks, Advance and TakeClosed between them.
      Diagnostics diag;
      StepAssembler a(&c, &diag, {});
      StepBreakdown sb(&diag, {.mode = mode});
      sb.SetProfileHasDevice();
      std::mt19937 rng(seed * 7);
      uint64_t watermark = 0;
      for (size_t i = 0; i < g.events.size();) {
        const size_t n = std::min<size_t>(g.events.size() - i, 1 + rng() % 9);
        const std::span<const Event> chunk(g.events.data() + i, n);
        a.Consume(chunk);
        for (const Event& e : chunk) watermark = std::max(watermark, e.end());
        a.Advance(watermark);
        std::vector<StepRecord> closed = a.TakeClosed();
        sb.Consume(closed);
        a.Recycle(std::move(closed));  // as the pipeline does: reused lists must not leak into new steps.
        i += n;
      }
      a.Flush();
      sb.Consume(a.TakeClosed());
      CHECK(diag.Get(Diag::late_for_step) == 0);
      REQUIRE(sb.rows().size() == ref.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        CHECK(sb.rows()[i].step_num == ref[i].step_num);
        CHECK(sb.rows()[i].begin_ns == ref[i].begin_ns);
        CHECK(sb.rows()[i].end_ns == ref[i].end_ns);
        for (size_t t = 0; t < kSpanTypeCount; ++t) {
          CAPTURE(t);
          CHECK(sb.rows()[i].type_ns[t] == ref[i].type_ns[t]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace liveprof::step_breakdown_test
