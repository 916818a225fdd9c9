// ChromeTraceWriter: import -> export -> import gives the same analyses, on
// a real Kineto trace and on a live-style stream (step markers, input spans),
// and what it writes is plain, valid JSON (gzip or not).
#include "import/chrome_export.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "aggregators/analyses.h"
#include "import/chunk_reader.h"
#include "import/trace_analysis.h"
#include "real_traces.h"
#include "stream/reorder_buffer.h"
#include "synthetic_workload.h"

namespace liveprof::chrome_export_test {
namespace {

// The path of the first difference between two JSON values, "" if none
// (short messages instead of two whole views).
std::string FirstDiff(const nlohmann::json& a, const nlohmann::json& b, const std::string& path = "") {
  if (a.type() != b.type()) return path + " (type)";
  if (a.is_object()) {
    for (const auto& [k, v] : a.items()) {
      if (!b.contains(k)) return path + "." + k + " (missing)";
      if (std::string d = FirstDiff(v, b[k], path + "." + k); !d.empty()) return d;
    }
    return b.size() == a.size() ? "" : path + " (extra members)";
  }
  if (a.is_array()) {
    if (a.size() != b.size())
      return path + " (size " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + ")";
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::string d = FirstDiff(a[i], b[i], path + "[" + std::to_string(i) + "]"); !d.empty()) return d;
    }
    return "";
  }
  return a == b ? "" : path + ": " + a.dump() + " vs " + b.dump();
}

std::string Diff(const std::string& a, const std::string& b) {
  return FirstDiff(nlohmann::json::parse(a), nlohmann::json::parse(b));
}

// The ac2g flows an export writes for its launches, which the importer
// leaves out (counted).
uint64_t LaunchFlows(const ImportReport& r) {
  const auto it = r.dropped.find("launch flows (the correlation ids carry the link)");
  return it == r.dropped.end() ? 0 : it->second;
}

std::string Temp(const std::string& name) { return (std::filesystem::temp_directory_path() / name).string(); }

// Every view `AnalyzeTrace` renders, by name.
std::map<std::string, std::string> Views(const TraceAnalysis& a) {
  const RenderedViews& v = a.views;
  return {{"overview", v.overview},
          {"steps", v.steps},
          {"input_pipeline", v.input_pipeline},
          {"tf_stats", v.tf_stats},
          {"kernel_stats", v.kernel_stats},
          {"memory", v.memory},
          {"alerts", v.alerts},
          {"pytorch", v.pytorch}};
}

TEST_CASE("export: real Kineto and XPlane traces exported and read back give every view the same") {
  // ResNet50 (2021: old category names, memory events) and HTA's AlexNet on
  // 8 A100s (new names, deviceProperties).
  const std::pair<const char*, uint64_t> files[] = {
      {"pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz", 0},
      {"facebookresearch__HolisticTraceAnalysis/tests/data/critical_path/alexnet/"
       "benchmark_result_2869224_1695835535_trace.json.gz",
       0},
      // XPlane to Chrome JSON: TF's allocator names and tf_op kernel-op links
      // go through liveprof's own args.
      {"tensorflow__profiler/demo/plugins/profile/GPU-multi-worker/34.83.195.179_6003.xplane.pb", 16'919},
      {"AMD-AGI__TraceLens/tests/traces/mi300/jax_conv_minimal_08/tw003.xplane.pb", 3'658},
      // baseTimeNanoseconds and distributedInfo (written after the events).
      {"facebookresearch__HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz", 0},
      // H200 (written back as read, so the analyses must agree too).
      {"gpu:h200/resnet18_h200_slowloader.pt.trace.json.gz", 0},
      {"gpu:h200/mlp_compiled_bf16_h200.pt.trace.json.gz", 0}};
  for (const auto& entry : files) {
    const std::string relative = entry.first;
    const auto& expected_events = entry.second;
    CAPTURE(relative);
    const std::filesystem::path trace =
        relative.starts_with("gpu:") ? test::GpuDataPath(relative.substr(4)) : test::TracePath(relative);
    if (trace.empty()) continue;
    // Chrome JSON is written back as read (every trace event); XPlane from
    // liveprof's events.
    const bool as_read = TraceFileImporter::IsChromeTrace(trace.string());
    const std::string out = Temp("liveprof_export_test.json.gz");
    uint64_t written = 0;
    std::string error;
    REQUIRE_MESSAGE(ExportTraceFile(trace.string(), out, &written, &error), error);
    if (expected_events != 0) CHECK(written == expected_events);
    RenderOptions ro;
    ro.on_request = true;  // the PyTorch view too.
    ro.steps = WindowSel{.last_steps = 100'000};
    TraceAnalysis before, after;
    REQUIRE(AnalyzeTrace(trace.string(), AnalysesOptions{}, ro, &before, &error));
    REQUIRE_MESSAGE(AnalyzeTrace(out, AnalysesOptions{}, ro, &after, &error), error);
    std::filesystem::remove(out);
    CHECK(after.events == before.events);
    if (as_read) {
      CHECK(written == before.report.trace_events);
      CHECK(after.report.dropped == before.report.dropped);  // what liveprof leaves out is still there.
      CHECK(after.report.caveats == before.report.caveats);
    } else {
      // Everything written is read, but the launch flows (Perfetto's arrows;
      // liveprof links launches by correlation id).
      CHECK(LaunchFlows(after.report) > 0);
      CHECK(after.report.dropped_total() == LaunchFlows(after.report));
      CHECK(after.events == written);
    }
    CHECK(after.report.base_time_ns == before.report.base_time_ns);
    CHECK(after.report.distributed == before.report.distributed);
    CHECK(after.report.rank == before.report.rank);
    CHECK(after.first_ns == before.first_ns);
    // Kineto's relative timestamps are put on the wall clock.
    if (before.report.has_base_time) CHECK(before.first_ns > static_cast<uint64_t>(before.report.base_time_ns));
    const auto a = Views(before), b = Views(after);
    for (const auto& entry : a) {
      const auto& name = entry.first;
      const auto& json = entry.second;
      CAPTURE(name);
      CHECK(json.size() > 20);
      CHECK(Diff(json, b.at(name)) == "");
    }
  }
}

// The server's export (/api/export): a trace held by the pipeline's trace
// store, written for a range, reads back with the same analyses.
TEST_CASE("export: a trace store's whole range exports to a file with every view the same") {
  const std::string trace = test::TracePath(
      "pytorch__kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz");
  if (trace.empty()) return;
  TraceFileImporter importer;
  std::vector<Event> defs, events;
  ImportReport report;
  std::string error;
  REQUIRE_MESSAGE(ImportWhole(importer, trace, &defs, &events, &report, &error, nullptr), error);
  std::stable_sort(events.begin(), events.end(), CompletionOrderLess);  // as the pipeline appends.
  TraceStore store;
  store.Append(defs, events);
  std::string gz;
  REQUIRE_MESSAGE(ExportStoreRange(store, 0, UINT64_MAX, {}, &gz, &error), error);
  const std::string out = Temp("liveprof_store_export.json.gz");
  {
    std::ofstream f(out, std::ios::binary);
    f << gz;
  }
  RenderOptions ro;
  ro.on_request = true;  // the PyTorch view too.
  ro.steps = WindowSel{.last_steps = 100'000};
  TraceAnalysis before, after;
  REQUIRE(AnalyzeTrace(trace, AnalysesOptions{}, ro, &before, &error));
  REQUIRE_MESSAGE(AnalyzeTrace(out, AnalysesOptions{}, ro, &after, &error), error);
  std::filesystem::remove(out);
  CHECK(after.events == before.events);
  // Nothing left out but the launch flows the export adds (Perfetto's
  // launch → kernel arrows; the correlation ids carry the link back in).
  CHECK(LaunchFlows(after.report) > 0);
  CHECK(after.report.dropped_total() == LaunchFlows(after.report));
  const auto a = Views(before), b = Views(after);
  for (const auto& entry : a) {
    const auto& name = entry.first;
    const auto& json = entry.second;
    CAPTURE(name);
    CHECK(Diff(json, b.at(name)) == "");
  }
}

TEST_CASE("import: deviceProperties become one device description per GPU") {
  const std::string text = R"({"deviceProperties": [
      {"id": 0, "name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42297524224, "computeMajor": 8,
       "computeMinor": 0, "numSms": 108, "warpSize": 32},
      {"id": 1, "name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42297524224, "computeMajor": 8,
       "computeMinor": 0, "numSms": 108}],
    "traceEvents": [{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":5,"dur":1}]})";
  ChromeTraceImporter importer;
  ImportReport report;
  std::string error;
  std::vector<Event> gpus;
  REQUIRE(importer.ImportText(
      text,
      [&](std::span<const Event>, std::span<const Event> events) {
        for (const Event& e : events)
          if (e.kind == EventKind::kDeviceInfo) gpus.push_back(e);
      },
      &report, &error));
  REQUIRE(gpus.size() == 2);
  CHECK(gpus[1].device == 1);
  CHECK(importer.names().Get(gpus[1].name) == "NVIDIA A100-PG509-200");
  CHECK(gpus[1].payload.device_info.memory_bytes == 42'297'524'224);
  CHECK(gpus[1].payload.device_info.sm_count == 108);
  CHECK(gpus[1].payload.device_info.cc_major == 8);
  CHECK(gpus[1].payload.device_info.cc_minor == 0);
  CHECK(report.events_out == 3);
}

TEST_CASE("export: a live stream's kinds (markers, input spans, copies, memory) survive the round trip") {
  test::WorkloadShape shape;
  shape.steps = 20;
  const test::Workload w = test::MakeWorkload(shape);
  for (const std::string name : {"liveprof_export_live.json", "liveprof_export_live.json.gz"}) {
    CAPTURE(name);
    const std::string out = Temp(name);
    ChromeTraceWriter writer;
    std::string error;
    REQUIRE(writer.Open(out, &error));
    // Host work first, as a file must have a kernel's op before the kernel.
    std::vector<Event> host, device;
    for (const Event& e : w.events) (IsDeviceKind(e.kind) ? device : host).push_back(e);
    REQUIRE(writer.Write(w.definitions, host, &error));
    REQUIRE(writer.Write({}, device, &error));
    REQUIRE(writer.Close(&error));
    CHECK(writer.events_written() == w.events.size());

    // Plain JSON a generic parser takes (through our reader for the gzip).
    ChunkReader reader;
    REQUIRE(reader.Open(out));
    std::string text;
    std::string_view chunk;
    while (reader.Next(&chunk) && !chunk.empty()) text += chunk;
    const nlohmann::json doc = nlohmann::json::parse(text);
    CHECK(doc["traceEvents"].size() >= w.events.size());

    // The same analyses as the stream itself gave, view for view.
    Diagnostics diag;
    Analyses direct(AnalysesOptions{}, &diag);
    std::vector<Event> sorted = w.events;
    direct.Consume(w.definitions, sorted, {}, sorted.back().end(), sorted.back().end());
    direct.Flush(sorted.back().end());
    const RenderedViews d = direct.Render(RenderOptions{});
    TraceAnalysis back;
    REQUIRE_MESSAGE(AnalyzeTrace(out, AnalysesOptions{}, RenderOptions{}, &back, &error), error);
    std::filesystem::remove(out);
    CHECK(back.events == w.events.size());
    CHECK(Diff(d.steps, back.views.steps) == "");
    CHECK(Diff(d.input_pipeline, back.views.input_pipeline) == "");
    CHECK(Diff(d.tf_stats, back.views.tf_stats) == "");
    CHECK(Diff(d.kernel_stats, back.views.kernel_stats) == "");
    // Memory: the same, allocator name included (liveprof's "Allocator" arg
    // beside Kineto's Device Type / Id).
    auto m1 = nlohmann::json::parse(d.memory), m2 = nlohmann::json::parse(back.views.memory);
    REQUIRE(m1["memories"].size() == 1);
    REQUIRE(m2["memories"].size() == 1);
    CHECK(m1["memories"][0]["allocator"] == "cuda_caching");
    CHECK(m2["memories"][0]["allocator"] == "cuda_caching");
    m2["memories"][0]["id"] = m1["memories"][0]["id"];
    CHECK(FirstDiff(m1, m2) == "");
  }
}

TEST_CASE("export: the store's export (/api/export) links each launch to its device work, with args") {
  test::WorkloadShape shape;
  shape.steps = 5;
  const test::Workload w = test::MakeWorkload(shape);
  // Each kernel with its launch details, as CUPTI gives them.
  std::vector<Event> defs = w.definitions;
  NameId details = 1;
  for (const Event& d : defs) details = std::max<NameId>(details, d.name + 1);
  defs.push_back(NameDefEvent(details, "regs:32 static_shared:0 grid:100,2,1 block:256,1,1"));
  std::vector<Event> sorted = w.events;
  for (Event& e : sorted) {
    if (e.kind == EventKind::kKernel) e.payload.kernel.details = details;
  }
  std::stable_sort(sorted.begin(), sorted.end(), CompletionOrderLess);  // as the pipeline appends.
  TraceStore store;
  store.Append(defs, sorted);
  std::string gz, error;
  REQUIRE_MESSAGE(ExportStoreRange(store, 0, UINT64_MAX, {}, &gz, &error), error);
  const std::string out = Temp("liveprof_store_flows.json.gz");
  {
    std::ofstream f(out, std::ios::binary);
    f << gz;
  }
  ChunkReader reader;
  REQUIRE(reader.Open(out));
  std::string text;
  std::string_view chunk;
  while (reader.Next(&chunk) && !chunk.empty()) text += chunk;
  std::filesystem::remove(out);
  const nlohmann::json doc = nlohmann::json::parse(text);
  // Correlation ids: of the launch calls, and of the device work.
  std::set<uint64_t> launches, device, starts, finishes;
  size_t kernels = 0, copies = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "cuda_runtime") launches.insert(e["args"]["correlation"].get<uint64_t>());
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      const auto& args = e["args"];
      device.insert(args["correlation"].get<uint64_t>());
      CHECK(args.contains("stream"));
      CHECK(args.contains("device"));
      if (cat == "kernel") {
        ++kernels;
        CHECK(args["grid"] == nlohmann::json::array({100, 2, 1}));
        CHECK(args["block"] == nlohmann::json::array({256, 1, 1}));
        CHECK(args["registers per thread"] == 32);
      } else if (cat == "gpu_memcpy") {
        ++copies;
        CHECK(args["bytes"].get<uint64_t>() > 0);
      }
    }
    if (cat == "ac2g") {
      (e["ph"] == "s" ? starts : finishes).insert(e["id"].get<uint64_t>());
      if (e["ph"] == "f") CHECK(e["bp"] == "e");  // binds to the enclosing slice: the kernel.
    }
  }
  CHECK(kernels > 0);
  CHECK(copies > 0);
  // One arrow per launch that has device work: from the call to its kernel.
  std::set<uint64_t> linked;
  for (const uint64_t c : launches) {
    if (device.count(c) != 0) linked.insert(c);
  }
  CHECK(!linked.empty());
  CHECK(starts == linked);
  CHECK(finishes == linked);
}

TEST_CASE("export: an unwritable path is an error that names it") {
  ChromeTraceWriter writer;
  std::string error;
  CHECK_FALSE(writer.Open("/nonexistent/dir/out.json.gz", &error));
  CHECK(error == "/nonexistent/dir/out.json.gz: No such file or directory");
}

}  // namespace
}  // namespace liveprof::chrome_export_test
