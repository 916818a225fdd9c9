// The import pieces over the real traces of ../shared/data/traces (see its
// MANIFEST.md). Skipped, with a message, where that folder is absent.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>

#include "import/chrome_trace.h"
#include "import/chunk_reader.h"
#include "import/json_splitter.h"
#include "import/trace_analysis.h"
#include "real_traces.h"

namespace liveprof::real_traces_test {
namespace {

using test::TracePath;

// The PyTorch plugin's own sample (tb_plugin run resnet50_num_workers_0,
// worker0, span 1) and its published responses, one per line.
constexpr char kResnetTrace[] =
    "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz";

// Line `n` (1-based) of the published responses, or null without the folder.
nlohmann::json PluginResponse(int n) {
  const std::string path =
      TracePath("pytorch__kineto/expected/tb_plugin_expected_resnet50_num_workers_0_worker0_span1.jsonl");
  if (path.empty()) return nullptr;
  std::ifstream in(path);
  std::string line;
  for (int i = 0; i < n; ++i) REQUIRE(std::getline(in, line));
  return nlohmann::json::parse(line);
}

struct Counted {
  uint64_t events = 0;
  uint64_t bytes = 0;
  std::vector<std::string> members;
  bool ok = false;
  std::string error;
};

Counted CountEvents(const std::string& path) {
  Counted c;
  ChunkReader reader;
  if (!reader.Open(path)) {
    c.error = reader.error();
    return c;
  }
  TraceJsonSplitter splitter([&](std::string_view, size_t n) { return c.events += n, true; },
                             [&](std::string_view key, std::string_view) { return c.members.emplace_back(key), true; });
  std::string_view chunk;
  while (reader.Next(&chunk) && !chunk.empty()) {
    if (!splitter.Feed(chunk)) break;
  }
  c.ok = reader.error().empty() && splitter.error().empty() && splitter.Finish();
  c.error = reader.error() + splitter.error();
  c.bytes = reader.bytes_out();
  return c;
}

TEST_CASE("import: a real Kineto trace (ResNet50, gzip) splits into its 75,718 events") {
  const std::string path = TracePath(kResnetTrace);
  if (path.empty()) return;
  const Counted c = CountEvents(path);
  REQUIRE_MESSAGE(c.ok, c.error);
  CHECK(c.events == 75'718);  // MANIFEST.md
  CHECK(c.members == std::vector<std::string>{"schemaVersion", "deviceProperties"});
}

TEST_CASE("import: the ResNet50 Kineto trace's kernels, runtime calls, ops, copies and memory events") {
  const std::string path = TracePath(kResnetTrace);
  if (path.empty()) return;
  ChromeTraceImporter importer;
  ImportReport report;
  std::string error;
  std::map<EventKind, uint64_t> kinds;
  uint64_t kernels_with_op = 0;
  REQUIRE_MESSAGE(importer.ImportFile(
                      path,
                      [&](std::span<const Event>, std::span<const Event> events) {
                        for (const Event& e : events) {
                          ++kinds[e.kind];
                          kernels_with_op += e.kind == EventKind::kKernel && e.payload.kernel.op != 0;
                        }
                      },
                      &report, &error),
                  error);
  CHECK(kernels_with_op == 8'772);  // every kernel finds its op through its external id.
  CHECK(report.trace_events == 75'718);
  // MANIFEST.md: 8 772 kernels, 12 838 memory events; the categories' counts.
  CHECK(kinds[EventKind::kKernel] == 8'772);
  CHECK(kinds[EventKind::kRuntimeApi] == 11'923);
  CHECK(kinds[EventKind::kFrameworkOp] == 23'646);
  CHECK(kinds[EventKind::kMemcpyHtoD] + kinds[EventKind::kMemcpyDtoH] + kinds[EventKind::kMemcpyDtoD] == 12);
  CHECK(kinds[EventKind::kMemset] == 312);
  CHECK(kinds[EventKind::kAlloc] + kinds[EventKind::kFree] == 12'838);
  // Left out: the launch flows (9 096 pairs; correlation ids carry the link)
  // and the profiler's own span over the capture (cat Trace).
  CHECK(report.dropped.at("launch flows (the correlation ids carry the link)") == 18'192);
  CHECK(report.dropped.at("category Trace (not analysed)") == 1);
  CHECK(report.dropped_total() == 18'193);
}

// The PyTorch view of the
// plugin's own sample equals what torch_tb_profiler published for it.
TEST_CASE("import: the PyTorch view of the ResNet50 trace equals the plugin's published overview") {
  const std::string path = TracePath(kResnetTrace);
  const nlohmann::json expected = PluginResponse(1);  // the overview response.
  if (path.empty() || expected.is_null()) return;

  AnalysesOptions options;
  RenderOptions render;
  render.on_request = true;  // the PyTorch view too.
  TraceAnalysis analysis;
  std::string error;
  REQUIRE_MESSAGE(AnalyzeTrace(path, options, render, &analysis, &error), error);
  const nlohmann::json ours = nlohmann::json::parse(analysis.views.pytorch);

  // Steps 5-10, each category in µs, with the plugin's tooltips.
  CHECK(ours["steps"] == expected["steps"]);
  // The average step (177592 µs) and each category's average and share.
  CHECK(ours["performance"] == expected["performance"]);
  CHECK(ours["performance"][0]["value"] == 177592);
  CHECK(ours["performance"][0]["children"][4]["name"] == "DataLoader");
  CHECK(ours["performance"][0]["children"][4]["value"] == 59262);
  CHECK(ours["environments"] == expected["environments"]);
  // The GPU summary, every row: name, memory, compute capability, GPU
  // utilization 55.51 %, Est. SM Efficiency 54.68 % (the kernels' blocks per
  // SM), Est. Achieved Occupancy 49.13 %, Kernel Time using Tensor Cores 0.0 %.
  CHECK(ours["gpu_metrics"]["data"] == expected["gpu_metrics"]["data"]);
  CHECK(ours["gpu_metrics"]["data"].size() == 8);
}

// Kernel totals per kernel equal the plugin's published tables.
TEST_CASE("import: the ResNet50 trace's kernel totals equal the plugin's kernel table, kernel by kernel") {
  const std::string path = TracePath(kResnetTrace);
  const nlohmann::json response = PluginResponse(4);  // kernel/table.
  if (path.empty() || response.is_null()) return;
  const nlohmann::json& table = response["data"];
  REQUIRE(table["columns"][0]["name"] == "Name");
  REQUIRE(table["columns"][2]["name"] == "Calls");
  REQUIRE(table["columns"][3]["name"] == "Total Duration (us)");

  TraceAnalysis analysis;
  std::string error;
  REQUIRE_MESSAGE(AnalyzeTrace(path, AnalysesOptions{}, RenderOptions{}, &analysis, &error), error);
  // Ours has a row per kernel and op; the plugin's per kernel.
  struct Sum {
    uint64_t calls = 0;
    double total_us = 0, max_us = 0;
  };
  std::map<std::string, Sum> ours;
  const nlohmann::json kernels = nlohmann::json::parse(analysis.views.kernel_stats);
  for (const auto& row : kernels["rows"]) {
    Sum& s = ours[row["kernel_name"].get<std::string>()];
    s.calls += row["occurrences"].get<uint64_t>();
    s.total_us += row["total_us"].get<double>();
    s.max_us = std::max(s.max_us, row["max_us"].get<double>());
  }
  CHECK(ours.size() == table["rows"].size());  // 67 kernels
  for (const auto& row : table["rows"]) {
    const std::string name = row[0].get<std::string>();
    CAPTURE(name);
    REQUIRE(ours.count(name) == 1);
    const Sum& s = ours[name];
    CHECK(std::llround(s.total_us) == row[3].get<int64_t>());
    CHECK(std::llround(s.max_us) == row[5].get<int64_t>());
    // xprof's kernel stats (docs/semantics-tf.md §7) leave out kernels of
    // zero duration; the plugin counts them (its minimum is then 0): one
    // kernel here, FillFunctor, with 636 calls under 1 µs.
    if (row[6].get<int64_t>() == 0) {
      CHECK(s.calls < row[2].get<uint64_t>());
    } else {
      CHECK(s.calls == row[2].get<uint64_t>());
    }
  }
}

TEST_CASE("import: the ResNet50 trace's ops are Tensor Core eligible exactly where the plugin says") {
  const std::string path = TracePath(kResnetTrace);
  const nlohmann::json response = PluginResponse(3);  // operator table: tc_eligible per op.
  if (path.empty() || response.is_null()) return;
  std::map<std::string, bool> published;
  for (const auto& op : response["data"]) published[op["name"].get<std::string>()] = op["tc_eligible"] == "Yes";
  TraceAnalysis analysis;
  std::string error;
  REQUIRE_MESSAGE(AnalyzeTrace(path, AnalysesOptions{}, RenderOptions{}, &analysis, &error), error);
  const nlohmann::json kernels = nlohmann::json::parse(analysis.views.kernel_stats);
  size_t compared = 0, eligible = 0;
  for (const auto& op : kernels["ops"]) {  // the ops that launched kernels.
    const std::string name = op["op_name"].get<std::string>();
    CAPTURE(name);
    REQUIRE(published.count(name) == 1);
    CHECK(op["op_tc_eligible"].get<bool>() == published[name]);
    ++compared;
    eligible += published[name];
  }
  CHECK(compared >= 20);
  CHECK(eligible >= 4);  // convolutions (forward and both backward halves), addmm.
}

// TraceLens' gpu_timeline.csv: each row's time (ms) by its type.
std::map<std::string, double> TraceLensTimeline(const std::string& path) {
  std::map<std::string, double> ms;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(','), b = line.find(',', a + 1);
    if (a == std::string::npos || b == std::string::npos || line.starts_with("type,")) continue;
    ms[line.substr(0, a)] = std::stod(line.substr(a + 1, b - a - 1));
  }
  return ms;
}

TEST_CASE("import: GPU busy and total time equal TraceLens' gpu_timeline.csv (bert-small, Falconsai)") {
  for (const char* name : {"gaunernst_bert-small-uncased__1016001", "Falconsai_nsfw_image_detection__1016002"}) {
    CAPTURE(name);
    const std::string dir = "AMD-AGI__TraceLens/tests/traces/h100/";
    const std::string trace = TracePath(dir + name + ".json.gz");
    const std::string csv = TracePath(dir + name + "_perf_report_csvs/gpu_timeline.csv");
    if (trace.empty() || csv.empty()) return;
    const std::map<std::string, double> published = TraceLensTimeline(csv);
    REQUIRE(published.count("busy_time") == 1);
    REQUIRE(published.count("total_time") == 1);

    TraceAnalysis analysis;
    std::string error;
    REQUIRE_MESSAGE(AnalyzeTrace(trace, AnalysesOptions{}, RenderOptions{}, &analysis, &error), error);
    REQUIRE(analysis.devices.devices.size() == 1);
    const auto& gpu = analysis.devices.devices[0];
    // Ours are exact (from the timestamps' text, in ns); TraceLens sums
    // float64 µs, so its own figures carry up to ~1.2 ns of rounding
    // (Falconsai's busy time: 1225308.84 published, 1225310 exactly).
    CHECK(std::abs(static_cast<double>(gpu.busy_ns) - published.at("busy_time") * 1e6) <= 1.5);
    CHECK(std::abs(static_cast<double>(gpu.span_ns) - published.at("total_time") * 1e6) <= 1.5);
  }
}

// Every row of TraceLens' gpu_timeline.csv against liveprof's GPU timeline
// of the whole trace (analyze's `device[].gpu_timeline`) and, where all the
// GPU work is inside the one ProfilerStep (bert-small, Falconsai: step 6),
// of that step (the steps view's per-step `gpu`). TraceLens sums float64
// µs: within 1.5 ns of our exact figures.
TEST_CASE("import: the GPU timeline, whole trace and per step, equals TraceLens' gpu_timeline.csv") {
  struct Case {
    const char* trace;
    const char* csv;
    bool one_step;
  };
  const std::string dir = "AMD-AGI__TraceLens/tests/traces/";
  for (const Case& c : {Case{"h100/gaunernst_bert-small-uncased__1016001.json.gz",
                             "h100/gaunernst_bert-small-uncased__1016001_perf_report_csvs/gpu_timeline.csv", true},
                        Case{"h100/Falconsai_nsfw_image_detection__1016002.json.gz",
                             "h100/Falconsai_nsfw_image_detection__1016002_perf_report_csvs/gpu_timeline.csv", true},
                        Case{"torch_compile_triton/trace.json.gz",
                             "torch_compile_triton/trace_perf_report_csvs/gpu_timeline.csv", false}}) {
    CAPTURE(c.trace);
    const std::string trace = TracePath(dir + c.trace);
    const std::string csv = TracePath(dir + c.csv);
    if (trace.empty() || csv.empty()) return;
    const std::map<std::string, double> ms = TraceLensTimeline(csv);
    REQUIRE(ms.size() == 8);
    TraceAnalysis analysis;
    std::string error;
    REQUIRE_MESSAGE(AnalyzeTrace(trace, AnalysesOptions{}, RenderOptions{}, &analysis, &error), error);
    REQUIRE(analysis.gpu_timelines.size() == 1);
    const GpuTimeline& t = analysis.gpu_timelines.begin()->second;
    auto near = [&](uint64_t ours, const char* row) {
      CAPTURE(row);
      CHECK(std::abs(static_cast<double>(ours) - ms.at(row) * 1e6) <= 1.5);
    };
    near(t.computation_ns, "computation_time");
    near(t.exposed_comm_ns, "exposed_comm_time");
    near(t.exposed_memcpy_ns, "exposed_memcpy_time");
    near(t.busy_ns, "busy_time");
    near(t.idle_ns, "idle_time");
    near(t.total_ns, "total_time");
    near(t.comm_ns, "total_comm_time");
    near(t.memcpy_ns, "total_memcpy_time");
    if (!c.one_step) continue;
    const nlohmann::json steps = nlohmann::json::parse(analysis.views.steps);
    REQUIRE(steps["rows"].size() == 1);
    const nlohmann::json& step = steps["rows"][0]["gpu"];
    for (const auto& pair : {std::pair{"computation_ms", "computation_time"},
                             {"exposed_memcpy_ms", "exposed_memcpy_time"},
                             {"busy_ms", "busy_time"},
                             {"idle_ms", "idle_time"},
                             {"total_ms", "total_time"}}) {
      const char* row = pair.second;
      CAPTURE(row);
      CHECK(std::abs(step[pair.first].get<double>() - ms.at(row)) <= 1.5e-6);
    }
    CHECK(steps["gpu_timeline"] == step);  // the window of one step.
  }
}

// HTA's trace_filter demo (examples/trace_filter_demo.ipynb) on rank 0 of a
// 128-rank job: the published counts of three filters, over our import.
TEST_CASE("import: HTA's trace_filter sample gives HTA's published filter counts") {
  const std::string path =
      TracePath("facebookresearch__HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz");
  if (path.empty()) return;
  ChromeTraceImporter importer;
  ImportReport report;
  std::string error;
  std::vector<Event> events;
  std::map<TrackId, uint64_t> stream_of;  // GPU track -> CUDA stream.
  REQUIRE_MESSAGE(importer.ImportFile(
                      path,
                      [&](std::span<const Event> defs, std::span<const Event> batch) {
                        for (const Event& d : defs) {
                          if (d.kind == EventKind::kTrackDef) stream_of[d.track] = d.payload.track_def.os_tid;
                        }
                        events.insert(events.end(), batch.begin(), batch.end());
                      },
                      &report, &error),
                  error);
  auto name = [&](const Event& e) { return importer.names().Get(e.name); };

  // NameFilter("aten::.*mm") (a regex search): 378 events.
  uint64_t mm = 0;
  for (const Event& e : events) {
    const std::string_view n = name(e);
    const size_t at = n.find("aten::");
    mm += IsSpanKind(e.kind) && at != std::string_view::npos && n.find("mm", at + 6) != std::string_view::npos;
  }
  CHECK(mm == 378);

  // TimeRangeFilter((1682725898237042, 1682725898240570)) µs: the 93 events
  // that lie wholly inside (96 begin inside).
  const uint64_t t0 = 1682725898237042'000, t1 = 1682725898240570'000;
  uint64_t inside = 0, begin_inside = 0;
  for (const Event& e : events) {
    if (!IsSpanKind(e.kind)) continue;
    inside += e.ts >= t0 && e.end() <= t1;
    begin_inside += e.ts >= t0 && e.ts <= t1;
  }
  CHECK(inside == 93);
  CHECK(begin_inside == 96);

  // IterationIndexFilter(0) + GPUKernelFilter() + NameFilter("^nccl"): the
  // five NCCL kernels of the first iteration (ProfilerStep#551), as
  // (ts µs, dur µs, stream). A kernel's iteration is its launch's step.
  uint64_t step_begin = 0, step_end = 0;
  std::map<uint32_t, uint64_t> launch_ts;
  for (const Event& e : events) {
    if (name(e) == "ProfilerStep#551") step_begin = e.ts, step_end = e.end();
    if (e.kind == EventKind::kRuntimeApi && e.corr != 0) launch_ts[e.corr] = e.ts;
  }
  REQUIRE(step_end > step_begin);
  std::vector<std::array<uint64_t, 3>> nccl;
  for (const Event& e : events) {
    if (e.kind != EventKind::kKernel || !name(e).starts_with("nccl")) continue;
    const auto launch = launch_ts.find(e.corr);
    REQUIRE(launch != launch_ts.end());
    if (launch->second >= step_begin && launch->second < step_end) {
      nccl.push_back({e.ts / 1000, e.dur / 1000, stream_of[e.track]});
      // HTA's table shows the name without its parameter list.
      CHECK(name(e).starts_with("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t("));
    }
  }
  std::sort(nccl.begin(), nccl.end());
  const std::vector<std::array<uint64_t, 3>> published = {{1682725898094377, 30669, 84},
                                                          {1682725898125052, 62783, 84},
                                                          {1682725898295662, 11727, 84},
                                                          {1682725898348496, 47652, 84},
                                                          {1682725898585321, 42496, 203}};
  CHECK(nccl == published);
}

// Catapult's edge case (MANIFEST: 1684 B, 1680 E): the matched pairs become
// spans, the 4 slices never closed are counted, not guessed.
TEST_CASE("import: unclosed B slices are counted and the closed ones kept (Catapult)") {
  const std::string path =
      TracePath("catapult-project__catapult/tracing/test_data/main_thread_has_unclosed_slices.json");
  if (path.empty()) return;
  ChromeTraceImporter importer;
  ImportReport report;
  std::string error;
  uint64_t spans = 0;
  REQUIRE_MESSAGE(importer.ImportFile(
                      path,
                      [&](std::span<const Event>, std::span<const Event> events) {
                        for (const Event& e : events) spans += e.kind == EventKind::kHostSpan;
                      },
                      &report, &error),
                  error);
  CHECK(report.phases.at("B") == 1684);
  CHECK(report.phases.at("E") == 1680);
  CHECK(report.dropped.at("B without E") == 4);
  CHECK(report.dropped.count("E without B") == 0);
  CHECK(report.phases.count("X") == 0);
  CHECK(spans == 1680);
}

// Every file in the traces folder imports, or fails with a message
// that says what it is instead. The CSV, text and Markdown files there are
// published results, not traces.
TEST_CASE("import: every trace file in the folder imports or says why not") {
  const std::string root = TracePath("MANIFEST.md");
  if (root.empty()) return;
  const std::filesystem::path dir = std::filesystem::path(root).parent_path();
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || entry.path().string().find("/expected/") != std::string::npos) continue;
    if (name.ends_with(".json") || name.ends_with(".gz") || name.ends_with(".pb")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 60);
  size_t imported = 0;
  for (const auto& file : files) {
    CAPTURE(file.string());
    TraceFileImporter importer;  // Chrome JSON, or XPlane by the name.
    ImportReport report;
    std::string error;
    const bool ok = importer.ImportFile(
        file.string(), [](std::span<const Event>, std::span<const Event>) {}, &report, &error);
    if (ok) {
      ++imported;
      CHECK(report.events_out > 0);  // a trace that imports gives events.
      continue;
    }
    // Not a trace, said so with what it is.
    const bool said =
        error.find("not a Chrome trace") != std::string::npos || error.find("nothing to import: ") != std::string::npos;
    CHECK_MESSAGE(said, error);
    CHECK(error.starts_with(file.string()));
  }
  MESSAGE(imported << " of " << files.size() << " files imported; the others said why not");
  CHECK(imported >= 38);  // 36 JSON traces, 2 XPlane files.
}

}  // namespace
}  // namespace liveprof::real_traces_test
