// The pipeline thread: publications, event chunks, render requests.
#include "pipeline/pipeline.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "producers/simulated_workload.h"
#include "stream/clock.h"

namespace liveprof::pipeline_test {
namespace {

constexpr uint64_t kSteps = 40;

struct Collected {
  std::mutex mu;
  std::vector<std::shared_ptr<const PipelineSnapshot>> snapshots;
  std::vector<std::shared_ptr<const EventChunk>> chunks;
};

Pipeline::Options FastOptions() {
  Pipeline::Options o;
  o.publish_period = std::chrono::milliseconds(5);
  o.drain.reorder.window_ns = 1'000'000;  // unpaced: everything is already over.
  return o;
}

SimulatedWorkloadOptions Unpaced(uint64_t steps) {
  SimulatedWorkloadOptions w;
  w.model.schedule = {{Scenario::kBalanced, 1}};
  w.steps = steps;
  w.paced = false;
  // In the past: everything is over, so the 1 ms window releases it at once.
  w.start_ns = HostNowNs() - 60'000'000'000;
  return w;
}

// Starts both, waits for the workload's steps, stops both (the pipeline
// takes in everything at its stop).
void RunToEnd(Pipeline& pipeline, SimulatedWorkload& workload) {
  pipeline.Start();
  workload.Start();
  workload.Wait();
  workload.Stop();
  pipeline.Stop();
}

TEST_CASE("pipeline: publications carry every step, chunks carry every event while tapped") {
  Stream stream;
  Pipeline pipeline(stream, FastOptions());
  Collected got;
  pipeline.SetSinks(
      [&](std::shared_ptr<const PipelineSnapshot> s) {
        std::lock_guard<std::mutex> lock(got.mu);
        got.snapshots.push_back(std::move(s));
      },
      [&](std::shared_ptr<const EventChunk> c) {
        std::lock_guard<std::mutex> lock(got.mu);
        got.chunks.push_back(std::move(c));
      });
  pipeline.SetEventTap(true);
  CHECK(pipeline.Latest() == nullptr);
  SimulatedWorkload workload(stream, Unpaced(kSteps));
  RunToEnd(pipeline, workload);

  std::lock_guard<std::mutex> lock(got.mu);
  REQUIRE(!got.snapshots.empty());
  // seq is 1, 2, 3... and the watermark never goes back.
  for (size_t i = 0; i < got.snapshots.size(); ++i) {
    CHECK(got.snapshots[i]->views.seq == i + 1);
    if (i > 0) CHECK(got.snapshots[i]->watermark_ns >= got.snapshots[i - 1]->watermark_ns);
  }
  const PipelineSnapshot& last = *got.snapshots.back();
  CHECK(pipeline.Latest().get() == &last);
  CHECK(last.metrics.steps_closed == kSteps);
  const nlohmann::json steps = nlohmann::json::parse(last.views.steps);
  CHECK(steps["type"] == "steps");
  CHECK(steps["seq"] == last.views.seq);
  const nlohmann::json status = nlohmann::json::parse(last.views.status);
  CHECK(status["protocol_version"] == kViewProtocolVersion);
  CHECK(status["run_environment"].contains("device_type"));

  // Chunks: gapless seq, every consumed event exactly once, definitions for
  // every name.
  uint64_t events = 0, names = 0;
  for (size_t i = 0; i < got.chunks.size(); ++i) {
    CHECK(got.chunks[i]->seq == i + 1);
    CHECK(got.chunks[i]->dropped == 0);
    events += got.chunks[i]->events.size();
    for (const Event& d : got.chunks[i]->definitions) names += d.kind == EventKind::kNameDef;
  }
  CHECK(events == last.metrics.events_consumed);
  CHECK(names == stream.names().size());
}

TEST_CASE("pipeline: without the tap, chunks carry definitions only, status names the sources") {
  Stream stream;
  Pipeline pipeline(stream, FastOptions());
  std::atomic<uint64_t> events{0}, defs{0};
  std::mutex mu;
  bool saw_gpu_ring = false;
  pipeline.SetSinks(
      [&](std::shared_ptr<const PipelineSnapshot> s) {
        std::lock_guard<std::mutex> lock(mu);
        const nlohmann::json status = nlohmann::json::parse(s->views.status);
        for (const auto& src : status["sources"]) {
          if (src["name"] == "sim gpu" && src["published"].get<uint64_t>() > 0) saw_gpu_ring = true;
        }
      },
      [&](std::shared_ptr<const EventChunk> c) {
        events += c->events.size();
        defs += c->definitions.size();
      });
  // Paced (real time, ~0.2 s): the rings stay open across many publications.
  SimulatedWorkloadOptions w;
  w.model.schedule = {{Scenario::kBalanced, 1}};
  w.steps = 4;
  SimulatedWorkload workload(stream, w);
  RunToEnd(pipeline, workload);
  CHECK(events == 0);
  CHECK(defs > 0);
  std::lock_guard<std::mutex> lock(mu);
  CHECK(saw_gpu_ring);
}

TEST_CASE("pipeline: a render request is answered on the pipeline thread, without a seq of its own") {
  Stream stream;
  Pipeline pipeline(stream, FastOptions());
  SimulatedWorkload workload(stream, Unpaced(30));
  pipeline.Start();
  workload.Start();
  workload.Wait();
  // Let the pipeline take in all of it (the events are all in the past).
  while (pipeline.Latest() == nullptr || pipeline.Latest()->metrics.steps_closed < 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  std::mutex mu;
  std::condition_variable cv;
  std::shared_ptr<const RenderedViews> answer;
  bool answered = false;
  RenderOptions ro;
  ro.csv = true;
  ro.steps = WindowSel{.last_steps = 7};
  pipeline.Request(ro, [&](std::shared_ptr<const RenderedViews> v) {
    std::lock_guard<std::mutex> lock(mu);
    answer = std::move(v);
    answered = true;
    cv.notify_one();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return answered; });
  }
  REQUIRE(answer != nullptr);
  CHECK(answer->tf_stats_csv.rfind("rank,side,type,name,", 0) == 0);
  const nlohmann::json steps = nlohmann::json::parse(answer->steps);
  // The window asked for: the last 7 of the breakdown's rows. (On a loaded
  // machine some unpaced steps can lose their device work as late and drop
  // out of the breakdown: the rows there are steps_total - steps_dropped.)
  const int64_t rows = steps["steps_total"].get<int64_t>() - steps["steps_dropped"].get<int64_t>();
  CHECK(steps["steps_total"].get<int64_t>() >= 20);
  CHECK(steps["rows"].size() == static_cast<size_t>(std::min<int64_t>(7, rows)));
  CHECK(rows >= 1);
  // The answer's seq is the last publication's: the feed's seq stays gapless.
  const auto latest = pipeline.Latest();
  REQUIRE(latest != nullptr);
  CHECK(answer->seq <= latest->views.seq);

  workload.Stop();
  pipeline.Stop();
  bool after_stop_null = false;
  pipeline.Request(ro, [&](std::shared_ptr<const RenderedViews> v) { after_stop_null = v == nullptr; });
  CHECK(after_stop_null);
}

// A GPU source that delivers its events late and says so (CUPTI, while the
// GPU runs behind the CPU, gives a buffer back once it is full: a second or
// more after its kernels ended): its events are waited for, not taken as
// late, and every step keeps its device work. Without the wait (a source
// that says it is behind waited for no longer than the window, as before)
// the same run has late events and steps without their device work.
struct DelayedRun {
  uint64_t steps_closed = 0, late_events = 0, late_for_step = 0, step_without_compute = 0;
  size_t rows = 0;
};
DelayedRun RunWithDelayedDevice(uint64_t declared_max_wait_ns) {
  constexpr uint64_t kDelayedSteps = 12;
  Stream stream;
  Pipeline::Options o;
  o.publish_period = std::chrono::milliseconds(5);
  o.drain.reorder.declared_max_wait_ns = declared_max_wait_ns;  // the window: 250 ms.
  Pipeline pipeline(stream, o);
  SimulatedWorkloadOptions w;
  w.model.schedule = {{Scenario::kBalanced, 1}};
  w.steps = kDelayedSteps;
  w.device_delay_ns = 700'000'000;
  SimulatedWorkload workload(stream, w);
  RunToEnd(pipeline, workload);
  DelayedRun r;
  const auto last = pipeline.Latest();
  REQUIRE(last != nullptr);
  r.steps_closed = last->metrics.steps_closed;
  const nlohmann::json status = nlohmann::json::parse(last->views.status);
  for (const auto& d : status["diagnostics"]) {
    if (d["name"] == "late_events") r.late_events = d["count"];
    if (d["name"] == "late_for_step") r.late_for_step = d["count"];
    if (d["name"] == "step_without_compute") r.step_without_compute = d["count"];
  }
  r.rows = nlohmann::json::parse(last->views.steps)["rows"].size();
  return r;
}

TEST_CASE("pipeline: a GPU source that says it is 0.7 s behind is waited for: no late events, every step whole") {
  const DelayedRun waited = RunWithDelayedDevice(ReorderBuffer::Options{}.declared_max_wait_ns);
  CHECK(ReorderBuffer::Options{}.declared_max_wait_ns >= 2'000'000'000);
  CHECK(waited.steps_closed == 12);
  CHECK(waited.late_events == 0);
  CHECK(waited.late_for_step == 0);
  CHECK(waited.step_without_compute == 0);
  CHECK(waited.rows == 12);

  const DelayedRun not_waited = RunWithDelayedDevice(ReorderBuffer::Options{}.window_ns);
  CHECK(not_waited.late_events > 0);
}

}  // namespace
}  // namespace liveprof::pipeline_test
