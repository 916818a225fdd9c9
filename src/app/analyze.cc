#include "app/analyze.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/json_writer.h"
#include "import/chrome_export.h"
#include "import/trace_analysis.h"

namespace liveprof {
namespace {

// Members in the order written (reading order), not sorted.
using json = nlohmann::ordered_json;

// "xplane", "cupti_recording" or "chrome_json": what TraceFileImporter reads `path` as.
std::string FileFormat(const std::string& path) {
  if (IsXPlanePath(path)) return "xplane";
#if defined(LIVEPROF_HAVE_CUPTI)
  if (IsCuptiRecordingFile(path)) return "cupti_recording";
#endif
  return "chrome_json";
}

// The steps view's rows with each category in ns (the view has ms).
// A GPU timeline's "<part>_ms" members as "<part>_ns" integers.
json TimelineInNs(const json& ms) {
  json out = json::object();
  for (const auto& [k, v] : ms.items()) {
    out[k.substr(0, k.size() - 3) + "_ns"] = std::llround(v.get<double>() * 1e6);
  }
  return out;
}

json StepsInNs(const json& steps) {
  json out = json::array();
  for (const json& row : steps.value("rows", json::array())) {
    json breakdown = json::object();
    const json& columns = steps["columns"];
    for (size_t i = 0; i < columns.size() && i < row["ms"].size(); ++i) {
      breakdown[columns[i].get<std::string>()] = std::llround(row["ms"][i].get<double>() * 1e6);
    }
    json step = {{"step", row["step"]},
                 {"begin_ns", row["begin_ns"]},
                 {"step_ns", std::llround(row["step_ms"].get<double>() * 1e6)},
                 {"breakdown_ns", breakdown}};
    if (row.contains("gpu")) step["gpu_timeline_ns"] = TimelineInNs(row["gpu"]);
    out.push_back(std::move(step));
  }
  return out;
}

json Document(const std::string& path, const TraceAnalysis& a) {
  const RenderedViews& v = a.views;
  json device = json::array();
  for (const auto& d : a.devices.devices) {
    device.push_back({{"ordinal", d.ordinal},
                      {"name", d.name},
                      {"busy_ns", d.busy_ns},
                      {"kernel_busy_ns", d.kernel_busy_ns},
                      {"span_ns", d.span_ns},
                      {"utilization_pct", d.utilization_pct}});
    if (const auto it = a.gpu_timelines.find(d.ordinal); it != a.gpu_timelines.end()) {
      JsonWriter w;  // the steps view's form, in ns as the steps' timelines.
      it->second.WriteJson(w);
      device.back()["gpu_timeline"] = TimelineInNs(json::parse(w.str()));
    }
  }
  const ImportReport& r = a.report;
  const std::string format = FileFormat(path);
  const json status = json::parse(v.status);
  const json steps = json::parse(v.steps);
  // In reading order: what was read, the summary, the steps, the views in
  // the dashboard's order, then alerts and diagnostics.
  return {
      {"type", "analyze"},
      {"v", 1},
      {"file", path},
      {"import",
       {{"format", format},
        {"bytes", r.bytes},
        {"trace_events", r.trace_events},
        {"events", r.events_out},
        {"dropped", r.dropped},
        {"caveats", r.caveats},
        {"base_time_ns", r.base_time_ns},
        {"schema", r.schema},
        {"records_by_kind", format == "cupti_recording" ? json(r.phases) : json()},
        {"hosts", r.hosts},
        {"distributed", r.distributed.empty() ? json() : json::parse(r.distributed)}}},
      {"overview", json::parse(v.overview)},
      {"steps", StepsInNs(steps)},
      {"steps_window", steps["window"]},
      {"device", device},
      {"input_pipeline", json::parse(v.input_pipeline)},
      {"tf_stats", json::parse(v.tf_stats)},
      {"kernel_stats", json::parse(v.kernel_stats)},
      {"memory", json::parse(v.memory)},
      {"pytorch_breakdown", v.pytorch.empty() ? json() : json::parse(v.pytorch)},
      {"alerts", json::parse(v.alerts)},
      {"diagnostics", status["diagnostics"]},
      {"dropped_events", r.dropped_total()},
  };
}

void PrintTables(const json& d, bool pytorch) {
  const json& imp = d["import"];
  const bool xplane = imp["format"] == "xplane";
  const bool recording = imp["format"] == "cupti_recording";
  std::printf("%s: %.1f MB of %s, %" PRIu64 " %s -> %" PRIu64 " events", d["file"].get<std::string>().c_str(),
              imp["bytes"].get<double>() / 1e6,
              xplane      ? "XSpace protobuf"
              : recording ? "CUPTI activity buffers"
                          : "JSON",
              imp["trace_events"].get<uint64_t>(),
              xplane      ? "XEvents"
              : recording ? "CUPTI records"
                          : "trace events",
              imp["events"].get<uint64_t>());
  std::printf("; %" PRIu64 " not imported\n", d["dropped_events"].get<uint64_t>());
  for (const auto& [why, n] : imp["dropped"].items())
    std::printf("    %8" PRIu64 "  %s\n", n.get<uint64_t>(), why.c_str());
  for (const auto& [what, n] : imp["caveats"].items()) {
    std::printf("    note: %s (%" PRIu64 ")\n", what.c_str(), n.get<uint64_t>());
  }
  if (recording) {
    std::printf("  records by kind:");
    for (const auto& [kind, n] : imp["records_by_kind"].items())
      std::printf(" %s %" PRIu64, kind.c_str(), n.get<uint64_t>());
    std::printf("\n");
  }
  for (const json& m : d["memory"]["memories"]) {
    std::printf("Memory %s: %" PRIu64 " allocations, %" PRIu64 " frees, peak %.1f MiB\n",
                m["id"].get<std::string>().c_str(), m["num_allocations"].get<uint64_t>(),
                m["num_deallocations"].get<uint64_t>(), m["peak_bytes"].get<double>() / (1 << 20));
  }

  for (const json& g : d["device"]) {
    std::printf("GPU %d: GPU utilization %.2f%% (busy %.3f ms of %.3f ms), kernels %.3f ms\n", g["ordinal"].get<int>(),
                g["utilization_pct"].get<double>(), g["busy_ns"].get<double>() / 1e6, g["span_ns"].get<double>() / 1e6,
                g["kernel_busy_ns"].get<double>() / 1e6);
  }
  if (!d["device"].empty()) {
    std::printf("  GPU utilization: %s\n", d["overview"]["gpu_utilization_definition"].get<std::string>().c_str());
  }
  if (d["kernel_stats"]["kernel_count"].get<uint64_t>() != 0) {
    std::printf("Kernel time using Tensor Cores (by kernel family): %.2f%% of %.3f ms\n",
                d["kernel_stats"]["tensor_core_pct"].get<double>(), d["kernel_stats"]["kernel_ns"].get<double>() / 1e6);
  }
  if (pytorch && d["pytorch_breakdown"].is_object()) {
    const json& p = d["pytorch_breakdown"];
    std::printf("\nPyTorch view: step time breakdown (us)\n  %-6s", "Step");
    const json& columns = p["steps"]["columns"];
    for (size_t i = 1; i < columns.size(); i += 2) std::printf(" %11s", columns[i]["name"].get<std::string>().c_str());
    std::printf("\n");
    for (const json& row : p["steps"]["rows"]) {
      std::printf("  %-6s", row[0].get<std::string>().c_str());
      for (size_t i = 1; i < row.size(); i += 2) std::printf(" %11" PRId64, row[i].get<int64_t>());
      std::printf("\n");
    }
    for (const json& perf : p["performance"]) {
      std::printf("  %s: %" PRId64 " us\n", perf["name"].get<std::string>().c_str(), perf["value"].get<int64_t>());
      for (const json& c : perf.value("children", json::array())) {
        std::printf("    %-12s %9" PRId64 " us %6.2f%%\n", c["name"].get<std::string>().c_str(),
                    c["value"].get<int64_t>(), c["extra"].get<double>());
      }
    }
    // The plugin's GPU rows, each with what it counts (not liveprof's
    // GPU utilization above).
    const json& defs = p["liveprof"]["definitions"];
    if (p.contains("gpu_metrics")) std::printf("  GPU summary (the plugin's rules):\n");
    for (const json& row : p.value("gpu_metrics", json::object()).value("data", json::array())) {
      const std::string title = row["title"].get<std::string>();
      std::printf("    %-32s %s\n", title.c_str(), row["value"].get<std::string>().c_str());
      if (defs.contains(title)) std::printf("      = %s\n", defs[title].get<std::string>().c_str());
    }
    for (const json& g : p["liveprof"]["gpus"]) {
      std::printf("    GPU %d, Tensor Cores by kernel family: %.2f %%\n      = %s\n", g["device"].get<int>(),
                  g["tensor_cores_by_family_pct"].get<double>(),
                  defs["tensor_cores_by_family_pct"].get<std::string>().c_str());
    }
    return;
  }
  const json& s = d["overview"]["summary"];
  std::printf("\nTF view: %d steps (%" PRId64 "-%" PRId64 "), average %.3f ms (stddev %.3f)\n", s["steps"].get<int>(),
              s["first_step"].get<int64_t>(), s["last_step"].get<int64_t>(), s["step_time_ms_avg"].get<double>(),
              s["step_time_ms_stddev"].get<double>());
  for (const auto& [k, pct] : s["pct"].items()) {
    std::printf("    %-20s %9.3f ms %6.2f%%\n", k.c_str(), s["avg_ms"][k].get<double>(), pct.get<double>());
  }
  const json& rec = d["overview"]["recommendation"];
  std::printf("  %s\n", rec["statement"].get<std::string>().c_str());
  std::printf("\nTop kernels (of %" PRIu64 "):\n", d["kernel_stats"]["kernel_count"].get<uint64_t>());
  int shown = 0;
  for (const json& k : d["kernel_stats"]["rows"]) {
    if (++shown > 10) break;
    std::printf("  %12.1f us %6" PRIu64 "x  %s\n", k["total_us"].get<double>(), k["occurrences"].get<uint64_t>(),
                k["kernel_name"].get<std::string>().substr(0, 100).c_str());
  }
}

int Analyze(const std::string& path, bool as_json, bool pretty, bool pytorch) {
  AnalysesOptions options;
  RenderOptions render;
  render.on_request = true;                         // the PyTorch view too.
  render.steps = WindowSel{.last_steps = 100'000};  // every step of the file.
  TraceAnalysis analysis;
  std::string error;
  ProgressLine progress(path);  // on stderr, when it is a terminal.
  if (!AnalyzeTrace(path, options, render, &analysis, &error, &progress)) {
    std::fprintf(stderr, "liveprof analyze: %s\n", error.c_str());
    return 1;
  }
  const json document = Document(path, analysis);
  if (as_json) {
    std::printf("%s\n", document.dump(pretty ? 2 : -1).c_str());
  } else {
    PrintTables(document, pytorch);
  }
  return 0;
}

int Export(const std::string& in, const std::string& out) {
  uint64_t events = 0;
  std::string error;
  if (!ExportTraceFile(in, out, &events, &error)) {
    std::fprintf(stderr, "liveprof export: %s\n", error.c_str());
    return 1;
  }
  std::printf("%s: %" PRIu64 " trace events written\n", out.c_str(), events);
  return 0;
}

}  // namespace

void AddAnalyzeCommands(CLI::App& app, Commands* commands) {
  struct AnalyzeArgs {
    std::string path;
    bool as_json = false;
    bool pretty = false;
    std::string view = "tf";
  };
  auto a = std::make_shared<AnalyzeArgs>();
  CLI::App* analyze = app.add_subcommand(
      "analyze",
      "a trace file (Chrome / Kineto JSON, XPlane .xplane.pb, CUPTI recording) through the analyses, as "
      "tables or --json (docs/analyze.md)");
  analyze->add_option("FILE", a->path, kTraceFileHelp)->required();
  analyze->add_flag("--json", a->as_json,
                    "one JSON document with every analysis, its members in reading order (docs/analyze.md)");
  analyze->add_flag("--pretty", a->pretty, "with --json: indented, a member per line")->needs("--json");
  analyze
      ->add_option("--view", a->view,
                   "the step breakdown to print: tf (TensorFlow Profiler's) or pytorch (the PyTorch "
                   "profiler plugin's)")
      ->check(CLI::IsMember({"tf", "pytorch"}));
  commands->Add(analyze, [a] { return Analyze(a->path, a->as_json, a->pretty, a->view == "pytorch"); });

  auto files = std::make_shared<std::pair<std::string, std::string>>();
  CLI::App* exp = app.add_subcommand(
      "export",
      "a trace file (Chrome / Kineto JSON, XPlane .xplane.pb, CUPTI recording) written as Chrome trace JSON "
      "(.json or .json.gz): Chrome / Kineto JSON as read, every arg, flow and metadata kept (docs/analyze.md)");
  exp->add_option("IN", files->first, kTraceFileHelp)->required();
  exp->add_option("OUT", files->second,
                  "the Chrome trace JSON to write (gzip when it ends in .gz): Perfetto and "
                  "chrome://tracing open it, liveprof analyze reads it back the same; a failed export "
                  "leaves no OUT (an existing one as it was)")
      ->required();
  commands->Add(exp, [files] { return Export(files->first, files->second); });
}

}  // namespace liveprof
