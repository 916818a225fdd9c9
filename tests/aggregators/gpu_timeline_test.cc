// The GPU timeline two ways: ComputeGpuTimeline (sorted by begin, unions
// merged, checked against TraceLens on real traces in real_traces_test) and
// GpuTimelineSweep (one pass by descending end, as a step's breakdown walks
// its device work). Same figures, on a hand-made case and on random ones,
// and in a step's breakdown whether the profile has a device or not.
#include "aggregators/steps/gpu_timeline.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "aggregators/steps/step_breakdown.h"
#include "doctest/doctest.h"

namespace liveprof::gpu_timeline_test {
namespace {

GpuTimeline Sweep(std::vector<GpuInterval> v, uint64_t begin, uint64_t end) {
  std::stable_sort(v.begin(), v.end(), [](const GpuInterval& a, const GpuInterval& b) { return a.end > b.end; });
  GpuTimelineSweep sweep(begin, end);
  for (const GpuInterval& g : v) sweep.Add(g.begin, g.end, g.work);
  return sweep.Finish();
}

GpuTimeline Sorted(std::vector<GpuInterval> v, uint64_t begin, uint64_t end) {
  GpuTimelineScratch scratch;
  return ComputeGpuTimeline(&v, begin, end, &scratch);
}

void CheckSame(const GpuTimeline& a, const GpuTimeline& b) {
  CHECK(a.total_ns == b.total_ns);
  CHECK(a.busy_ns == b.busy_ns);
  CHECK(a.idle_ns == b.idle_ns);
  CHECK(a.computation_ns == b.computation_ns);
  CHECK(a.exposed_comm_ns == b.exposed_comm_ns);
  CHECK(a.exposed_memcpy_ns == b.exposed_memcpy_ns);
  CHECK(a.comm_ns == b.comm_ns);
  CHECK(a.memcpy_ns == b.memcpy_ns);
}

TEST_CASE("gpu timeline: a hand-made window, both ways") {
  // [0, 100): compute 10-40 and 30-50, a collective 45-70 (5 under compute),
  // a copy 60-90 (10 under the collective), one clipped at 95-120.
  const std::vector<GpuInterval> v = {{10, 40, GpuWork::kCompute},
                                      {30, 50, GpuWork::kCompute},
                                      {45, 70, GpuWork::kCommunication},
                                      {60, 90, GpuWork::kMemcpy},
                                      {95, 120, GpuWork::kCompute}};
  const GpuTimeline t = Sweep(v, 0, 100);
  CHECK(t.total_ns == 100);
  CHECK(t.computation_ns == 45);  // 10-50 and 95-100.
  CHECK(t.comm_ns == 25);
  CHECK(t.exposed_comm_ns == 20);  // 50-70.
  CHECK(t.memcpy_ns == 30);
  CHECK(t.exposed_memcpy_ns == 20);  // 70-90.
  CHECK(t.busy_ns == 85);            // 10-90 and 95-100.
  CHECK(t.idle_ns == 15);
  CheckSame(t, Sorted(v, 0, 100));
}

TEST_CASE("gpu timeline: random device work, the sweep equals the sorted unions") {
  std::mt19937 rng(5);
  for (int round = 0; round < 500; ++round) {
    std::vector<GpuInterval> v;
    const int n = static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      const uint64_t b = rng() % 1000;
      const uint64_t len = rng() % 4 == 0 ? 0 : rng() % 120;  // some empty.
      v.push_back({b, b + len, static_cast<GpuWork>(rng() % 3)});
    }
    const uint64_t begin = rng() % 200, end = begin + rng() % 1000;
    CAPTURE(round);
    CheckSame(Sweep(v, begin, end), Sorted(v, begin, end));
  }
}

TEST_CASE("gpu timeline: a step's, in its breakdown with or without a device profile, equals the sorted unions") {
  std::mt19937 rng(11);
  BreakdownScratch scratch;
  for (int round = 0; round < 200; ++round) {
    StepRecord step;
    step.host_begin_ns = 0;
    step.host_end_ns = 2000;
    std::vector<GpuInterval> v;
    const int n = 1 + static_cast<int>(rng() % 40);
    uint64_t first = ~uint64_t{0}, last = 0;
    for (int i = 0; i < n; ++i) {
      const uint64_t b = 100 + rng() % 1500, e = b + rng() % 200;
      const auto work = static_cast<GpuWork>(rng() % 3);
      v.push_back({b, e, work});
      StepSpan s;
      s.begin = b;
      s.end = e;
      s.type = work == GpuWork::kMemcpy ? SpanType::kHostToDevice : SpanType::kDeviceCompute32;
      s.work = work;
      step.device_spans.push_back(s);
      step.device_types |= 1u << static_cast<unsigned>(s.type);
      first = std::min(first, b);
      last = std::max(last, e);
    }
    if (rng() % 2 == 0) {  // in completion order (the usual case), else as they came.
      std::stable_sort(step.device_spans.begin(), step.device_spans.end(),
                       [](const StepSpan& a, const StepSpan& b) { return a.end < b.end; });
    }
    step.device_begin_ns = first;
    step.device_end_ns = last;
    CAPTURE(round);
    const GpuTimeline want = Sorted(v, first, last);
    for (const bool device_profile : {true, false}) {
      bool ok = false;
      const StepBreakdownRow row =
          ComputeStepBreakdown(step, BreakdownMode::kHostAndDevice, device_profile, &ok, &scratch);
      CAPTURE(device_profile);
      CheckSame(row.gpu, want);
    }
  }
}

}  // namespace
}  // namespace liveprof::gpu_timeline_test
