// `liveprof export` keeps what Perfetto and the PyTorch plugin read (issue
// 27): the H200 Kineto traces go through import -> export, and both files,
// parsed as JSON, hold the same ac2g / fwdbwd flows, the same events per
// category with their args (Input Dims, cbid, Total Allocated, ...), the same
// top-level metadata, and every GPU process has its process_name; an XPlane
// export names its GPU processes and links launches by ac2g flows. A failed
// export leaves no file. (The analyses of the file read back: the round trip
// test of chrome_export_test.cc, which runs these traces too.)
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "import/chrome_export.h"
#include "import/chunk_reader.h"
#include "real_traces.h"

namespace liveprof::chrome_export_keep_test {
namespace {

using nlohmann::json;

std::string Inflate(const std::string& path) {
  ChunkReader reader;
  REQUIRE_MESSAGE(reader.Open(path), reader.error());
  std::string all;
  std::string_view chunk;
  while (reader.Next(&chunk) && !chunk.empty()) all.append(chunk);
  return all;
}

json ReadJson(const std::string& path) { return json::parse(Inflate(path)); }

// A folder of its own, empty, so that a test can see every file left in it.
std::filesystem::path EmptyDir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<std::string> Listing(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

json Member(const json& e, const char* key) { return e.contains(key) ? e[key] : json(); }

// The plugin-relevant args (docs/semantics-pytorch.md), by category; "[memory]"
// stands for the memory instant events.
const std::map<std::string, std::vector<std::string>>& PluginArgs() {
  static const std::map<std::string, std::vector<std::string>> args = {
      {"cpu_op",
       {"Input Dims", "Input type", "Input Strides", "Sequence number", "Fwd thread id", "External id",
        "Record function id"}},
      {"kernel",
       {"grid", "block", "registers per thread", "shared memory", "blocks per SM", "warps per SM",
        "est. achieved occupancy %", "stream", "correlation", "device", "External id"}},
      {"cuda_runtime", {"cbid", "correlation", "External id"}},
      {"cuda_driver", {"cbid", "correlation", "External id"}},
      {"gpu_memcpy", {"device", "stream", "correlation", "bytes", "memory bandwidth (GB/s)"}},
      {"gpu_memset", {"device", "stream", "correlation", "bytes"}},
      {"[memory]", {"Total Allocated", "Total Reserved", "Bytes", "Addr", "Device Id", "Device Type"}},
  };
  return args;
}

// What one trace holds, in comparable form.
struct Digest {
  // category (or "[memory]", or "M <name>") -> each event's place, times and
  // plugin-relevant args, sorted.
  std::map<std::string, std::vector<std::string>> events;
  // ac2g and fwdbwd flows: cat, ph, id, ts, pid, tid, bp; sorted.
  std::map<std::string, std::vector<std::string>> flows;
  // plugin-relevant arg -> how many events carry it (so the comparison is
  // not vacuous).
  std::map<std::string, uint64_t> args_seen;
  json top;                        // every top-level member but traceEvents.
  std::set<std::string> gpu_pids;  // pids of kernels, copies, memsets.
  std::set<std::string> named_pids;
};

Digest Digested(const json& doc) {
  Digest d;
  for (const auto& [k, v] : doc.items()) {
    if (k != "traceEvents") d.top[k] = v;
  }
  for (const json& e : doc["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    const std::string cat = e.value("cat", "");
    const std::string name = e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "";
    json key = {ph, name, Member(e, "pid"), Member(e, "tid"), Member(e, "ts")};
    if (ph == "s" || ph == "t" || ph == "f") {
      key.push_back(Member(e, "id"));
      key.push_back(Member(e, "bp"));
      d.flows[cat].push_back(key.dump());
      continue;
    }
    if (ph == "M") {
      key.push_back(Member(e, "args"));
      d.events["M " + name].push_back(key.dump());
      if (name == "process_name") d.named_pids.insert(Member(e, "pid").dump());
      continue;
    }
    key.push_back(Member(e, "dur"));
    const std::string group = name == "[memory]" ? name : cat;
    if (group == "kernel" || group == "gpu_memcpy" || group == "gpu_memset") d.gpu_pids.insert(Member(e, "pid").dump());
    const json args = Member(e, "args");
    const auto plugin = PluginArgs().find(group);
    if (plugin == PluginArgs().end() || !args.is_object()) {
      key.push_back(args);  // other categories: all their args.
    } else {
      for (const std::string& a : plugin->second) {
        key.push_back(Member(args, a.c_str()));
        if (args.contains(a)) ++d.args_seen[group + ": " + a];
      }
    }
    d.events[group].push_back(key.dump());
  }
  for (auto* m : {&d.events, &d.flows}) {
    for (auto& [_, rows] : *m) std::sort(rows.begin(), rows.end());
  }
  return d;
}

TEST_CASE("export keeps flows, args, metadata and process names of the H200 Kineto traces") {
  const auto dir = EmptyDir("liveprof_export_keep");
  for (const char* file : {"h200/resnet18_h200_slowloader.pt.trace.json.gz", "h200/resnet18_8steps.pt.trace.json.gz",
                           "h200/mlp_compiled_bf16_h200.pt.trace.json.gz"}) {
    CAPTURE(file);
    const std::string trace = test::GpuDataPath(file);
    if (trace.empty()) continue;
    const std::string out = (dir / "out.json.gz").string();
    uint64_t written = 0;
    std::string error;
    REQUIRE_MESSAGE(ExportTraceFile(trace, out, &written, &error), error);
    const json original = ReadJson(trace);
    const json exported = ReadJson(out);
    CHECK(written == original["traceEvents"].size());
    const Digest a = Digested(original), b = Digested(exported);
    // Every flow, as Perfetto binds it (id, ts, pid / tid, binding point).
    REQUIRE(a.flows.count("ac2g") == 1);
    CHECK(a.flows.at("ac2g").size() > 0);
    CHECK(b.flows == a.flows);
    if (std::string(file).find("slowloader") != std::string::npos) {
      CHECK(b.flows.at("ac2g").size() == 5'097);        // what an earlier export dropped.
      CHECK(a.args_seen.at("cpu_op: Input Dims") > 0);  // record_shapes was on.
      CHECK(a.args_seen.at("[memory]: Total Allocated") > 0);
    }
    // The args the plugin reads are there, and come back.
    CHECK(a.args_seen.at("cpu_op: Sequence number") > 0);
    CHECK(a.args_seen.at("kernel: registers per thread") > 0);
    CHECK(a.args_seen.at("cuda_runtime: cbid") > 0);
    CHECK(b.args_seen == a.args_seen);
    for (const auto& entry : a.events) {
      const std::string& group = entry.first;
      const std::vector<std::string>& rows = entry.second;
      CAPTURE(group);
      REQUIRE(b.events.count(group) == 1);
      CHECK(b.events.at(group).size() == rows.size());
      CHECK(b.events.at(group) == rows);
    }
    CHECK(b.events.size() == a.events.size());
    // Top-level metadata: CUDA versions, record_shapes, trace_id, deviceProperties, ...
    CHECK(a.top.contains("trace_id"));
    CHECK(a.top.contains("cuda_runtime_version"));
    CHECK(b.top == a.top);
    // Every GPU process is named.
    CHECK_FALSE(b.gpu_pids.empty());
    for (const std::string& pid : b.gpu_pids) {
      CAPTURE(pid);
      CHECK(b.named_pids.count(pid) == 1);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "export names each GPU process of a trace that has no process_name and links launches (XPlane, Chrome JSON)") {
  const auto dir = EmptyDir("liveprof_export_names");
  // A Kineto-like trace without metadata: the GPU process gets Kineto's three.
  const std::string in = (dir / "bare.json").string();
  {
    std::ofstream f(in);
    f << R"({"traceEvents": [
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":7,"tid":7,"ts":10,"dur":2,"args":{"correlation":5,"cbid":211}},
      {"ph":"X","cat":"kernel","name":"k","pid":1,"tid":3,"ts":15,"dur":4,"args":{"device":1,"stream":3,"correlation":5}},
      {"ph":"s","cat":"ac2g","name":"ac2g","id":5,"pid":7,"tid":7,"ts":10},
      {"ph":"f","cat":"ac2g","name":"ac2g","id":5,"pid":1,"tid":3,"ts":15,"bp":"e"}],
      "record_shapes": 1})";
  }
  const std::string xplane =
      test::TracePath("tensorflow__profiler/demo/plugins/profile/GPU-multi-worker/34.83.195.179_6003.xplane.pb");
  std::vector<std::string> inputs = {in};
  if (!xplane.empty()) inputs.push_back(xplane);
  for (const std::string& input : inputs) {
    CAPTURE(input);
    const std::string out = (dir / "out.json").string();
    uint64_t written = 0;
    std::string error;
    REQUIRE_MESSAGE(ExportTraceFile(input, out, &written, &error), error);
    const json doc = ReadJson(out);
    const Digest d = Digested(doc);
    CHECK_FALSE(d.gpu_pids.empty());
    CHECK(d.named_pids == d.gpu_pids);  // the GPUs', not the host's (which had none either).
    for (const json& e : doc["traceEvents"]) {
      if (e.value("name", "") == "process_labels") CHECK(e["args"]["labels"] == "GPU " + e["pid"].dump());
      if (e.value("name", "") == "process_sort_index")
        CHECK(e["args"]["sort_index"] == 5'000'000 + e["pid"].get<int>());
    }
    // Each launch's device activity ends a flow its launch call starts
    // (Kineto's ac2g, Perfetto's arrows), and no flow is left open.
    std::set<uint64_t> starts, ends;
    for (const json& e : doc["traceEvents"]) {
      if (e.value("cat", "") != "ac2g") continue;
      (e["ph"] == "s" ? starts : ends).insert(e["id"].get<uint64_t>());
    }
    CHECK_FALSE(ends.empty());
    CHECK(starts == ends);
    if (input == in) {
      CHECK(written == 4);
      CHECK(doc["record_shapes"] == 1);
      CHECK(d.flows.at("ac2g").size() == 2);
      CHECK(d.named_pids == std::set<std::string>{"1"});
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a failed export leaves no file: unwritable folder, missing, bad or truncated input") {
  const auto dir = EmptyDir("liveprof_export_fail");
  const std::string out = (dir / "out.json.gz").string();
  uint64_t written = 0;
  std::string error;
  SUBCASE("an unwritable folder") {
    const std::string in = (dir / "ok.json").string();
    std::ofstream(in) << R"([{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}])";
    CHECK_FALSE(ExportTraceFile(in, (dir / "no" / "out.json").string(), &written, &error));
    CHECK(error == (dir / "no" / "out.json").string() + ": No such file or directory");
    CHECK(Listing(dir) == std::vector<std::string>{"ok.json"});
  }
  SUBCASE("a missing input") {
    CHECK_FALSE(ExportTraceFile((dir / "absent.json").string(), out, &written, &error));
    CHECK(error.find("absent.json") != std::string::npos);
    CHECK(Listing(dir).empty());
  }
  SUBCASE("not JSON") {
    const std::string in = (dir / "bad.json").string();
    std::ofstream(in) << "{\"traceEvents\": [{\"ph\": \"X\", \"ts\": nope}]}";
    CHECK_FALSE(ExportTraceFile(in, out, &written, &error));
    CHECK(error.find("bad.json") != std::string::npos);
    CHECK(Listing(dir) == std::vector<std::string>{"bad.json"});
  }
  SUBCASE("a trace cut short, after some MB were written: an existing OUT is left as it was") {
    const std::string trace = test::GpuDataPath("h200/resnet18_h200_slowloader.pt.trace.json.gz");
    if (trace.empty()) return;
    const std::string text = Inflate(trace);
    REQUIRE(text.size() > (size_t{4} << 20));
    const std::string in = (dir / "cut.json").string();
    std::ofstream(in, std::ios::binary) << text.substr(0, text.size() * 3 / 4);
    std::ofstream(out) << "before";
    CHECK_FALSE(ExportTraceFile(in, out, &written, &error));
    CHECK(error.find("cut.json") != std::string::npos);
    CHECK(Listing(dir) == std::vector<std::string>{"cut.json", "out.json.gz"});
    std::ifstream f(out);
    std::string kept;
    std::getline(f, kept);
    CHECK(kept == "before");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace liveprof::chrome_export_keep_test
