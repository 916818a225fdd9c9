// The simulated GPU workload: deterministic, shaped like CUPTI + host API
// output, and each scenario, fed through the analyses, gives the breakdown
// and classification it was built to give. Also its threads through a real
// Stream and DrainLoop.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "aggregators/analyses.h"
#include "doctest/doctest.h"
#include "producers/simulated_model.h"
#include "producers/simulated_workload.h"
#include "simulated_run.h"
#include "stream/drain_loop.h"
#include "stream/reorder_buffer.h"
#include "stream/stream.h"

namespace liveprof::simulated_workload_test {
namespace {

using Run = test::SimulatedRun;

Run MakeRun(Scenario scenario, uint32_t n, NameTable* names, uint64_t seed = 7) {
  return test::MakeSimulatedRun(scenario, n, names, seed);
}

struct Views {
  nlohmann::json overview, input, steps, memory, alerts;
};

Views Analyze(const Run& r) {
  Diagnostics diag;
  Analyses a(AnalysesOptions{}, &diag);
  a.Consume(r.definitions, r.events, {}, r.events.back().end(), r.events.back().end());
  a.Flush(r.events.back().end());
  RenderOptions ro;
  ro.steps = WindowSel{.last_steps = 1000};
  const RenderedViews v = a.Render(ro);
  return {nlohmann::json::parse(v.overview), nlohmann::json::parse(v.input_pipeline), nlohmann::json::parse(v.steps),
          nlohmann::json::parse(v.memory), nlohmann::json::parse(v.alerts)};
}

bool SameEvent(const Event& a, const Event& b) {
  return a.ts == b.ts && a.dur == b.dur && a.name == b.name && a.track == b.track && a.corr == b.corr &&
         a.kind == b.kind && a.sub == b.sub && a.flags == b.flags && a.device == b.device &&
         a.payload.raw[0] == b.payload.raw[0] && a.payload.raw[1] == b.payload.raw[1];
}

TEST_CASE("simulated model: the same seed gives the same events, another seed others") {
  NameTable n1, n2, n3;
  const Run a = MakeRun(Scenario::kBalanced, 5, &n1, 11);
  const Run b = MakeRun(Scenario::kBalanced, 5, &n2, 11);
  const Run c = MakeRun(Scenario::kBalanced, 5, &n3, 12);
  REQUIRE(a.events.size() == b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) CHECK(SameEvent(a.events[i], b.events[i]));
  size_t same = 0;
  for (size_t i = 0; i < std::min(a.events.size(), c.events.size()); ++i) {
    same += SameEvent(a.events[i], c.events[i]) ? 1 : 0;
  }
  CHECK(same < a.events.size() / 2);  // kernel durations differ.
}

TEST_CASE("simulated model: every device event has its launch, after it, in its step") {
  NameTable names;
  SimulatedModelOptions o;
  o.streams = 3;
  o.schedule = {{Scenario::kBalanced, 1}, {Scenario::kLaunchBound, 1}};
  SimulatedModel model(o, &names);
  uint64_t start = 1'000'000;
  for (int i = 0; i < 4; ++i) {
    const SimulatedStep s = model.Next(start);
    CHECK(s.scenario == (i % 2 == 0 ? Scenario::kBalanced : Scenario::kLaunchBound));
    std::map<uint32_t, const Event*> launches;
    int markers = 0;
    for (const Event& e : s.host) {
      CHECK(e.ts >= s.begin_ns);
      CHECK(e.end() <= s.end_ns);
      if (e.kind == EventKind::kRuntimeApi) launches[e.corr] = &e;
      if (e.kind == EventKind::kStepMarker) {
        ++markers;
        CHECK(e.payload.step.step_num == i);
      }
    }
    CHECK(markers == 1);
    std::map<TrackId, uint64_t> stream_end;
    size_t kernels = 0;
    for (const Event& d : s.device) {
      REQUIRE(launches.count(d.corr) == 1);
      CHECK(d.ts >= launches[d.corr]->end());  // no kernel before its launch returns.
      CHECK(d.end() <= s.end_ns);
      kernels += d.kind == EventKind::kKernel ? 1 : 0;
      if (d.kind == EventKind::kKernel && names.Get(d.name).find("nccl") == std::string_view::npos) {
        CHECK(d.payload.kernel.op != 0);
        CHECK(names.Get(d.payload.kernel.details).starts_with("regs:"));
      }
    }
    // Streams never run two things at once.
    std::vector<Event> by_start = s.device;
    std::sort(by_start.begin(), by_start.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });
    for (const Event& d : by_start) {
      CHECK(d.ts >= stream_end[d.track]);
      stream_end[d.track] = d.end();
    }
    const uint32_t kpo = s.scenario == Scenario::kLaunchBound ? 12 : o.kernels_per_op;
    CHECK(kernels == size_t{o.ops_per_step} * kpo + 1);  // + the all-reduce.
    start = s.end_ns;
  }
}

TEST_CASE("simulated model: memory is balanced per step except while it grows") {
  NameTable names;
  SimulatedModelOptions o;
  o.schedule = {{Scenario::kBalanced, 2}, {Scenario::kMemoryGrowth, 70}, {Scenario::kBalanced, 1}};
  SimulatedModel model(o, &names);
  uint64_t start = 1'000'000, in_use = 0, peak = 0;
  for (int i = 0; i < 73; ++i) {
    const SimulatedStep s = model.Next(start);
    start = s.end_ns;
    for (const Event& e : s.host) {
      if (e.kind == EventKind::kAlloc) in_use += e.payload.memory.bytes;
      if (e.kind == EventKind::kFree) in_use -= e.payload.memory.bytes;
      peak = std::max(peak, in_use);
    }
    if (i < 2) CHECK(in_use == 0);
  }
  CHECK(in_use == 0);  // the leak was released when it passed 90 % and at the switch back.
  CHECK(peak > o.memory_capacity * 85 / 100);
  CHECK(peak <= o.memory_capacity);
}

TEST_CASE("simulated scenarios: each gives the breakdown it was built to give") {
  SUBCASE("balanced: device-bound, NOT input-bound") {
    NameTable names;
    const Views v = Analyze(MakeRun(Scenario::kBalanced, 30, &names));
    INFO(v.input.dump().substr(0, 600));
    CHECK(v.input["bottleneck"]["input_classification"] == "NOT input-bound");
    CHECK(v.input["bottleneck"]["input_pct"].get<double>() < 5.0);
    CHECK(v.input["bottleneck"]["compute_pct"].get<double>() > 80.0);
    CHECK(v.input["bottleneck"]["kernel_launch_level"] == "no");
  }
  SUBCASE("input-bound: input >= 30 % of the step, HIGHLY input-bound") {
    NameTable names;
    const Views v = Analyze(MakeRun(Scenario::kInputBound, 30, &names));
    INFO(v.input.dump().substr(0, 600));
    CHECK(v.input["bottleneck"]["input_classification"] == "HIGHLY input-bound");
    CHECK(v.input["bottleneck"]["input_pct"].get<double>() >= 30.0);
    CHECK(v.overview["recommendation"]["bottleneck"] == "HIGHLY input-bound");
  }
  SUBCASE("launch-bound: the device waits on kernel launches") {
    NameTable names;
    const Views v = Analyze(MakeRun(Scenario::kLaunchBound, 30, &names));
    INFO(v.input.dump().substr(0, 600));
    CHECK(v.input["bottleneck"]["kernel_launch_pct"].get<double>() > 50.0);
    CHECK(v.input["bottleneck"]["kernel_launch_level"] == "high");
    CHECK(v.input["bottleneck"]["input_classification"] == "NOT input-bound");
    std::vector<std::string> patterns;
    for (const auto& p : v.overview["recommendation"]["patterns"]) patterns.push_back(p["id"]);
    INFO(v.overview["recommendation"]["patterns"].dump());
    CHECK(std::find(patterns.begin(), patterns.end(), "tiny_kernels") != patterns.end());
  }
  SUBCASE("memory growth: in use climbs past 85 % of capacity") {
    NameTable names;
    const Views v = Analyze(MakeRun(Scenario::kMemoryGrowth, 60, &names));
    INFO(v.memory.dump().substr(0, 600));
    REQUIRE(v.memory["memories"].size() == 1);
    const auto& m = v.memory["memories"][0];
    const double capacity = static_cast<double>(SimulatedModelOptions{}.memory_capacity);
    CHECK(m["capacity_bytes"].get<double>() == capacity);  // from the GPU's kDeviceInfo.
    CHECK(m["lifetime_peak_heap_bytes"].get<double>() > 0.85 * capacity);
    CHECK(m["lifetime_peak_heap_bytes"].get<double>() <= capacity);
    // The memory rule saw it: near capacity fires.
    bool fired = false;
    for (const auto& e : v.alerts["history"]) {
      fired = fired || (e["metric"] == "memory_used_pct" && e["state"] == "firing");
    }
    CHECK(fired);
  }
}

TEST_CASE("simulated workload: its two threads write every event through the rings") {
  Stream stream;
  std::mutex mu;
  std::vector<Event> got;
  uint64_t defs = 0;
  DrainLoop drain(stream, DrainLoop::Options{}, [&](const Batch& b) {
    std::lock_guard<std::mutex> lock(mu);
    defs += b.definitions.size();  // each batch carries the definitions new to it.
    got.insert(got.end(), b.events.begin(), b.events.end());
    got.insert(got.end(), b.late.begin(), b.late.end());
  });
  SimulatedWorkloadOptions o;
  o.steps = 12;
  o.paced = false;
  o.start_ns = 5'000'000'000;
  o.model.seed = 3;
  o.model.streams = 3;
  o.model.schedule = {{Scenario::kInputBound, 1}};
  SimulatedWorkload w(stream, o);
  drain.Start();
  w.Start();
  w.Wait();
  drain.Stop();  // drains and flushes what is left.

  // The same steps from a model of our own (the names are the stream's).
  SimulatedModelOptions mo = o.model;
  mo.main_track = 1;  // tracks as the workload registered them, in order.
  mo.loader_track = 2;
  mo.stream_tracks = {3, 4, 5};
  SimulatedModel model(mo, &stream.names());
  size_t expected = 1;  // the device info.
  uint64_t start = 1'000'000'000;
  for (int i = 0; i < 12; ++i) {
    const SimulatedStep s = model.Next(start);
    start = s.end_ns;
    expected += s.host.size() + s.device.size();
  }
  std::lock_guard<std::mutex> lock(mu);
  size_t device_info = 0, markers = 0, events = 0;
  for (const Event& e : got) {
    if (e.kind == EventKind::kNameDef || e.kind == EventKind::kTrackDef) continue;
    ++events;
    device_info += e.kind == EventKind::kDeviceInfo ? 1 : 0;
    markers += e.kind == EventKind::kStepMarker ? 1 : 0;
  }
  CHECK(events == expected);
  CHECK(device_info == 1);
  CHECK(markers == 12);
  CHECK(stream.TotalDropped() == 0);
  CHECK(stream.TotalPublished() == expected);
  CHECK(w.steps_done() == 12);
  CHECK(stream.track_count() == 6);  // 5 tracks, ids 1..5.
  CHECK(stream.track(3).type == TrackType::kGpuStream);
  CHECK(defs > 0);
}

TEST_CASE("simulated workload: --workers runs each rank as its own process, the straggler slower") {
  Stream stream;
  Diagnostics diag;
  Analyses analyses(AnalysesOptions{}, &diag);
  DrainLoop drain(stream, DrainLoop::Options{},
                  [&](const Batch& b) { analyses.Consume(b.definitions, b.events, b.late, b.watermark_ns, b.now_ns); });
  SimulatedWorkloadOptions o;
  o.steps = 8;
  // Paced, on the host clock: unpaced, the events are all behind the drain's
  // watermark and come as late ones, whose order a slow build (ASan) made
  // cost a worker 2 of its 8 steps.
  o.paced = true;
  o.flush_period_ns = 20'000'000;
  o.model.schedule = {{Scenario::kBalanced, 1}};
  o.workers = 3;
  o.straggler = 1;
  SimulatedWorkload w(stream, o);
  drain.Start();
  w.Start();
  w.Wait();
  drain.Stop();
  analyses.Flush(0);
  CHECK(w.steps_done() == 8);
  CHECK(stream.TotalDropped() == 0);

  // Per rank: a kProcess track "rank i" and its own tracks, all of worker i + 1.
  std::map<uint32_t, std::string> labels;
  std::map<uint32_t, int> tracks;
  for (TrackId t = 1; t < stream.track_count(); ++t) {
    const TrackInfo info = stream.track(t);
    ++tracks[info.process];
    if (info.type == TrackType::kProcess) labels[info.process] = std::string(stream.names().Get(info.name));
  }
  CHECK(labels == std::map<uint32_t, std::string>{{1, "rank 0"}, {2, "rank 1"}, {3, "rank 2"}});
  CHECK(tracks == std::map<uint32_t, int>{{1, 5}, {2, 5}, {3, 5}});  // label, 2 threads, 2 streams.

  const auto pod = nlohmann::json::parse(analyses.Render(RenderOptions{}).pod);
  REQUIRE(pod["workers"].size() == 3);
  for (const auto& worker : pod["workers"]) CHECK(worker["steps"] == 8);
  CHECK(pod["straggler"]["label"] == "rank 1");
  // Rank 1's device work takes 1.5x as long: its steps about half as long again.
  const double slow = pod["workers"][1]["mean_step_ms"].get<double>();
  const double fast = pod["workers"][0]["mean_step_ms"].get<double>();
  CHECK(slow / fast > 1.4);
  CHECK(slow / fast < 1.6);
  CHECK(pod["workers"][1]["worst_count"] == 8);
  CHECK(pod["straggler"]["pct"].get<double>() > 40);
}

}  // namespace
// Its rings hold a quarter second of the rate asked (one simulated thread
// at 1 M events/s fills the stream's default ring in 65 ms), the default at
// the model's own rate, at most 262,144 events.
TEST_CASE("simulated workload: its rings hold a quarter second of the rate asked") {
  for (const double rate : {0.0, 1e6, 5e6}) {
    CAPTURE(rate);
    Stream stream;
    SimulatedWorkloadOptions o;
    o.steps = 1;
    o.paced = false;
    o.events_per_second = rate;
    SimulatedWorkload w(stream, o);
    w.Start();
    w.Wait();
    const std::vector<Stream::RingStats> rings = stream.Stats();
    REQUIRE(rings.size() == 2);
    for (const Stream::RingStats& r : rings) {
      // 250,000 up to a power of two; 1,250,000 capped.
      CHECK(r.capacity == (rate == 0 ? stream.options().ring_capacity : size_t{1} << 18));
    }
  }
}

}  // namespace liveprof::simulated_workload_test
