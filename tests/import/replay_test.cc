// TraceReplay: a trace through the live path (ring, drain loop on the
// replay's clock, pipeline) gives what `liveprof analyze` gives for the same
// file, at max speed and paced, once or looping, with nothing late or lost.
#include "import/replay.h"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "import/trace_analysis.h"
#include "pipeline/pipeline.h"
#include "real_traces.h"

namespace liveprof::replay_test {
namespace {

// A PyTorch-like trace: `steps` ProfilerStep#N spans of 10 ms, each with an op,
// its launch and its kernel (5 ms), and a data-loading span of `input_us`.
std::string WriteTrace(int steps, int input_us) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("liveprof_replay_test_" + std::to_string(steps) + ".json");
  std::ofstream out(path);
  out << R"({"traceEvents": [)";
  bool first = true;
  auto event = [&](const std::string& json) {
    out << (first ? "" : ",\n") << json;
    first = false;
  };
  const uint64_t t0 = 1'700'000'000'000'000;  // µs, as Kineto writes them.
  for (int s = 0; s < steps; ++s) {
    const uint64_t b = t0 + static_cast<uint64_t>(s) * 10'000;
    const std::string step = std::to_string(s);
    event(R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#)" + step + R"(","pid":1,"tid":1,"ts":)" +
          std::to_string(b) + R"(,"dur":10000})");
    event(
        R"({"ph":"X","cat":"user_annotation","name":"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__","pid":1,"tid":1,"ts":)" +
        std::to_string(b + 1) + R"(,"dur":)" + std::to_string(input_us) + "}");
    const uint64_t op = b + 2 + static_cast<uint64_t>(input_us);
    const std::string id = std::to_string(100 + s);
    event(R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":)" + std::to_string(op) +
          R"(,"dur":50,"args":{"External id":)" + id + "}}");
    event(R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":)" +
          std::to_string(op + 10) + R"(,"dur":5,"args":{"correlation":)" + id + R"(,"External id":)" + id + "}}");
    event(R"({"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":"stream 7","ts":)" + std::to_string(op + 20) +
          R"(,"dur":5000,"args":{"device":0,"stream":7,"correlation":)" + id + R"(,"External id":)" + id + "}}");
  }
  out << "]}";
  return path.string();
}

struct Live {
  std::shared_ptr<const PipelineSnapshot> last;
  uint64_t written = 0, loops = 0, late = 0;
};

// Replays `path` through a pipeline until `until` says so, then stops both.
template <typename Until>
Live Replay(const std::string& path, TraceReplay::Options o, Until until) {
  Stream stream;
  TraceReplay replay(stream, o);
  std::string error;
  REQUIRE_MESSAGE(replay.Load(path, &error), error);
  Pipeline::Options po;
  po.drain.clock = [&replay] { return replay.Clock(); };
  po.publish_period = std::chrono::milliseconds(10);
  Pipeline pipeline(stream, po);
  pipeline.Start();
  replay.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!until(replay) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Let the pipeline see the end (the clock moved past the window).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  replay.Stop();
  pipeline.Stop();
  Live live{pipeline.Latest(), replay.events_written(), replay.loops_done(),
            stream.diagnostics().Get(Diag::late_events)};
  CHECK(stream.TotalDropped() == 0);
  return live;
}

nlohmann::json Steps(const std::string& steps_view) {
  nlohmann::json j = nlohmann::json::parse(steps_view);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : j["rows"]) out.push_back({r["step"], r["step_ms"], r["ms"]});
  return out;
}

TEST_CASE("replay: at max speed and paced, the live views equal analyze's for the file") {
  const std::string path = WriteTrace(12, 3000);
  TraceAnalysis batch;
  std::string error;
  RenderOptions ro;
  REQUIRE(AnalyzeTrace(path, AnalysesOptions{}, ro, &batch, &error));
  const nlohmann::json expected = Steps(batch.views.steps);
  REQUIRE(expected.size() == 12);

  for (const bool max_speed : {true, false}) {
    CAPTURE(max_speed);
    TraceReplay::Options o;
    o.max_speed = max_speed;
    o.speed = 10;  // 120 ms of trace in ~12 ms.
    const Live live = Replay(path, o, [](const TraceReplay& r) { return r.done(); });
    REQUIRE(live.last != nullptr);
    CHECK(live.written == batch.events);
    CHECK(live.loops == 1);
    CHECK(live.late == 0);
    CHECK(Steps(live.last->views.steps) == expected);
    const auto status = nlohmann::json::parse(live.last->views.status);
    CHECK(status["events_consumed"] == batch.events);
    CHECK(status["step_source"] == "profiler_step");
  }
  std::filesystem::remove(path);
}

TEST_CASE("replay: --loop writes the file again and again, one loop after the other") {
  const std::string path = WriteTrace(4, 6000);
  TraceAnalysis batch;
  std::string error;
  REQUIRE(AnalyzeTrace(path, AnalysesOptions{}, RenderOptions{}, &batch, &error));
  const nlohmann::json once = Steps(batch.views.steps);
  REQUIRE(once.size() == 4);
  TraceReplay::Options o;
  o.max_speed = true;
  o.loop = true;
  const Live live = Replay(path, o, [](const TraceReplay& r) { return r.loops_done() >= 3; });
  std::filesystem::remove(path);
  REQUIRE(live.last != nullptr);
  CHECK(live.loops >= 3);
  CHECK(live.written >= 3 * 20);  // 5 events a step, 4 steps a loop.
  CHECK(live.late == 0);
  // Every loop's four steps, numbered on from the last loop's (0 1 2 3 4
  // 5 ...: a step number never repeats, so the step axes run forward), each
  // as in the file: step n is the file's step n mod 4.
  const nlohmann::json steps = Steps(live.last->views.steps);
  REQUIRE(steps.size() >= 12);
  for (size_t i = 0; i < steps.size(); ++i) {
    CAPTURE(i);
    const size_t n = steps[i][0].get<size_t>();
    if (i > 0) CHECK(n == steps[i - 1][0].get<size_t>() + 1);
    CHECK(steps[i][1] == once[n % 4][1]);  // its time.
    CHECK(steps[i][2] == once[n % 4][2]);  // its breakdown.
  }
  CHECK(steps.back()[0].get<size_t>() >= 11);
}

// The headline alert on the most common real case. The H200
// slow-loader job (../shared/data/gpu) waits 91.6 % of each step in its
// DataLoader; replayed live, in a loop, it must read input-bound.
TEST_CASE("replay: --loop of the H200 slow-loader PyTorch trace fires input_bound_high") {
  const std::string path = test::GpuDataPath("h200/resnet18_h200_slowloader.pt.trace.json.gz");
  if (path.empty()) return;
  TraceReplay::Options o;
  o.max_speed = true;
  o.loop = true;
  const Live live = Replay(path, o, [](const TraceReplay& r) { return r.loops_done() >= 3; });
  REQUIRE(live.last != nullptr);
  CHECK(live.loops >= 3);
  const auto alerts = nlohmann::json::parse(live.last->views.alerts);
  bool firing = false;
  for (const auto& a : alerts["firing"]) {
    if (a["rule"] != "input_bound_high") continue;
    firing = true;
    CHECK(a["value"].get<double>() > 91.5);
    CHECK(a["value"].get<double>() < 91.7);
  }
  CHECK_MESSAGE(firing, alerts["firing"].dump());
  const auto input = nlohmann::json::parse(live.last->views.input_pipeline);
  CHECK(input["bottleneck"]["input_classification"] == "HIGHLY input-bound");
  CHECK(input["host_side"]["source"] == "pytorch_dataloader");
}

TEST_CASE("replay: a file it cannot read, or without events, is an error") {
  Stream stream;
  TraceReplay replay(stream, {});
  std::string error;
  CHECK_FALSE(replay.Load("/nonexistent/trace.json", &error));
  CHECK(error.find("/nonexistent/trace.json") != std::string::npos);
  const std::filesystem::path empty = std::filesystem::temp_directory_path() / "liveprof_replay_empty.json";
  std::ofstream(empty) << R"({"traceEvents": []})";
  TraceReplay none(stream, {});
  CHECK_FALSE(none.Load(empty.string(), &error));
  CHECK(error == empty.string() + ": no events to replay");
  std::filesystem::remove(empty);
}

}  // namespace
}  // namespace liveprof::replay_test
