// XPlane import: XSpaces built here with the generated classes, written to
// files and read back (the mapping, times, steps, what is dropped, bad
// files), and the two real .xplane.pb files of ../shared/data/traces against
// the counts of their MANIFEST and a protoc --decode walk.
#include "import/xplane.h"

#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "import/trace_analysis.h"
#include "import/trace_file.h"
#include "real_traces.h"
#include "xplane.pb.h"

namespace liveprof::xplane_test {
namespace {

using xplane::XEvent;
using xplane::XLine;
using xplane::XPlane;
using xplane::XSpace;

// Adds metadata, events and stats to one plane by name.
class PlaneBuilder {
 public:
  explicit PlaneBuilder(XPlane* p) : p_(p) {}
  XLine* Line(int64_t id, const std::string& name, int64_t timestamp_ns) {
    XLine* l = p_->add_lines();
    l->set_id(id);
    l->set_name(name);
    l->set_timestamp_ns(timestamp_ns);
    return l;
  }
  XEvent* Event(XLine* line, const std::string& name, int64_t offset_ps, int64_t duration_ps) {
    XEvent* e = line->add_events();
    e->set_metadata_id(EventId(name));
    e->set_offset_ps(offset_ps);
    e->set_duration_ps(duration_ps);
    return e;
  }
  void U64(XEvent* e, const std::string& stat, uint64_t v) { Add(e->add_stats(), stat)->set_uint64_value(v); }
  void I64(XEvent* e, const std::string& stat, int64_t v) { Add(e->add_stats(), stat)->set_int64_value(v); }
  void Str(XEvent* e, const std::string& stat, const std::string& v) { Add(e->add_stats(), stat)->set_str_value(v); }
  // The value as the name of another stat metadata (how writers share strings).
  void Ref(XEvent* e, const std::string& stat, const std::string& v) {
    Add(e->add_stats(), stat)->set_ref_value(static_cast<uint64_t>(StatId(v)));
  }
  void PlaneU64(const std::string& stat, uint64_t v) { Add(p_->add_stats(), stat)->set_uint64_value(v); }

 private:
  xplane::XStat* Add(xplane::XStat* s, const std::string& stat) {
    s->set_metadata_id(StatId(stat));
    return s;
  }
  int64_t StatId(const std::string& name) {
    for (const auto& [id, m] : p_->stat_metadata()) {
      if (m.name() == name) return id;
    }
    const auto id = static_cast<int64_t>(p_->stat_metadata().size() + 1);
    auto& m = (*p_->mutable_stat_metadata())[id];
    m.set_id(id);
    m.set_name(name);
    return id;
  }
  int64_t EventId(const std::string& name) {
    for (const auto& [id, m] : p_->event_metadata()) {
      if (m.name() == name) return id;
    }
    const auto id = static_cast<int64_t>(p_->event_metadata().size() + 1);
    auto& m = (*p_->mutable_event_metadata())[id];
    m.set_id(id);
    m.set_name(name);
    return id;
  }
  XPlane* p_;
};

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("liveprof_xplane_test_" + name)).string();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

struct Imported {
  bool ok = false;
  std::string error;
  ImportReport report;
  std::vector<Event> defs, events;
  TraceFileImporter importer;
  std::string Name(NameId id) const { return std::string(importer.names().Get(id)); }
  std::vector<const Event*> Kind(EventKind k) const {
    std::vector<const Event*> out;
    for (const Event& e : events) {
      if (e.kind == k) out.push_back(&e);
    }
    return out;
  }
  const Event* TrackDef(TrackId id) const {
    for (const Event& d : defs) {
      if (d.kind == EventKind::kTrackDef && d.track == id) return &d;
    }
    return nullptr;
  }
};

void Import(const std::string& path, Imported* out) {
  out->ok = out->importer.ImportFile(
      path,
      [&](std::span<const Event> defs, std::span<const Event> batch) {
        out->defs.insert(out->defs.end(), defs.begin(), defs.end());
        out->events.insert(out->events.end(), batch.begin(), batch.end());
      },
      &out->report, &out->error);
}

// A host thread, a GPU with stream and derived lines, and a TPU plane.
XSpace SmallSpace() {
  XSpace space;
  space.add_hostnames("worker-a");
  PlaneBuilder host(space.add_planes());
  space.mutable_planes(0)->set_name("/host:CPU");
  XLine* t = host.Line(7, "python3", 1000);
  XEvent* root = host.Event(t, "train", 0, 900000000);  // 900 us
  host.I64(root, "_r", 1);
  host.I64(root, "step_num", 5);
  host.Event(t, "model/dense/MatMul:MatMul", 1500, 2000);  // ps: 1.5 ns .. 3.5 ns
  host.U64(host.Event(t, "cudaLaunchKernel", 10000, 5000), "correlation_id", 42);
  host.Event(t, "Iterator::Prefetch#id=3#", 20000, 1000);
  XEvent* alloc = host.Event(t, "MemoryAllocation", 30000, 100);
  host.Ref(alloc, "allocator_name", "GPU_1_bfc");
  host.U64(alloc, "addr", 4096);
  host.I64(alloc, "allocation_bytes", 256);
  XEvent* free = host.Event(t, "MemoryDeallocation", 40000, 100);
  host.Str(free, "allocator_name", "cpu");
  host.U64(free, "addr", 8192);
  host.I64(free, "allocation_bytes", 64);
  host.Event(t, "ExecutorState::Process", 50000, 1000);

  XPlane* gpu_plane = space.add_planes();
  gpu_plane->set_name("/device:GPU:1");
  PlaneBuilder gpu(gpu_plane);
  gpu.PlaneU64("core_count", 80);
  gpu.PlaneU64("compute_cap_major", 7);
  gpu.PlaneU64("compute_cap_minor", 0);
  XLine* s = gpu.Line(3, "Stream #3(Compute)", 2000);
  XEvent* k = gpu.Event(s, "volta_sgemm_128x64_nn", 1000000, 3000000);  // 1 us .. 4 us after 2000 ns
  gpu.U64(k, "correlation_id", 42);
  gpu.Ref(k, "kernel_details", "regs:32 static_shared:0 dynamic_shared:0 grid:1,1,1 block:128,1,1 occ_pct:50");
  gpu.Ref(k, "tf_op", "model/dense/MatMul:MatMul#shape=(f32[2])#");
  XEvent* copy = gpu.Event(s, "MemcpyH2D", 5000000, 1000000);
  gpu.Str(copy, "memcpy_details", "size:4096 dest:1 async:1");
  gpu.U64(copy, "correlation_id", 43);
  gpu.Event(s, "Memset", 7000000, 1000000);
  XLine* ops = gpu.Line(-559038734, "TensorFlow Ops", 2000);
  gpu.Event(ops, "MatMul", 1000000, 3000000);
  gpu.Event(ops, "MatMul", 5000000, 1000000);

  XPlane* tpu_plane = space.add_planes();
  tpu_plane->set_name("/device:TPU:0");
  PlaneBuilder tpu(tpu_plane);
  XLine* tl = tpu.Line(1, "XLA Ops", 0);
  for (int i = 0; i < 3; ++i) tpu.Event(tl, "fusion", i * 1000, 500);
  return space;
}

TEST_CASE("xplane: host threads, GPU streams and what each event becomes") {
  const std::string path = TempPath("small.xplane.pb");
  WriteFile(path, SmallSpace().SerializeAsString());
  Imported im;
  Import(path, &im);
  REQUIRE_MESSAGE(im.ok, im.error);
  CHECK(im.report.trace_events == 7 + 3 + 2 + 3);  // every XEvent, dropped ones too.
  CHECK(im.report.hosts == std::vector<std::string>{"worker-a"});
  CHECK(im.report.dropped.at("events of plane /device:TPU:0 (not analysed)") == 3);
  CHECK(im.report.dropped.at("events of derived line TensorFlow Ops (the other lines hold them)") == 2);

  // Times: the line's ns plus the offset's ps, begin and end floored.
  const auto ops = im.Kind(EventKind::kFrameworkOp);
  REQUIRE(ops.size() == 1);
  CHECK(im.Name(ops[0]->name) == "model/dense/MatMul:MatMul");
  CHECK(ops[0]->ts == 1001);
  CHECK(ops[0]->dur == 2);  // 1001.5 .. 1003.5 -> 1001 .. 1003
  const Event* thread = im.TrackDef(ops[0]->track);
  REQUIRE(thread != nullptr);
  CHECK(im.Name(thread->name) == "python3");
  CHECK(thread->payload.track_def.os_tid == 7);
  CHECK(thread->payload.track_def.type == TrackType::kHostThread);

  const auto launches = im.Kind(EventKind::kRuntimeApi);
  REQUIRE(launches.size() == 1);
  CHECK(launches[0]->corr == 42);
  CHECK(launches[0]->ts == 1010);
  const auto input = im.Kind(EventKind::kInputSpan);
  REQUIRE(input.size() == 1);
  CHECK(im.Name(input[0]->name) == "Iterator::Prefetch");  // the TraceMe args cut off.
  const auto spans = im.Kind(EventKind::kHostSpan);
  REQUIRE(spans.size() == 1);
  CHECK(im.Name(spans[0]->name) == "ExecutorState::Process");

  const auto allocs = im.Kind(EventKind::kAlloc);
  REQUIRE(allocs.size() == 1);
  CHECK(im.Name(allocs[0]->name) == "GPU_1_bfc");
  CHECK(allocs[0]->device == 1);
  CHECK(allocs[0]->sub == static_cast<uint8_t>(MemoryKind::kDevice));
  CHECK(allocs[0]->payload.memory.address == 4096);
  CHECK(allocs[0]->payload.memory.bytes == 256);
  const auto frees = im.Kind(EventKind::kFree);
  REQUIRE(frees.size() == 1);
  CHECK(frees[0]->sub == static_cast<uint8_t>(MemoryKind::kHost));
  CHECK(frees[0]->payload.memory.bytes == 64);

  // No device has a Steps line: the host's root (_r with step_num) is the step.
  const auto steps = im.Kind(EventKind::kStepMarker);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0]->payload.step.step_num == 5);
  CHECK(steps[0]->ts == 1000);
  CHECK(steps[0]->dur == 900000);

  const auto kernels = im.Kind(EventKind::kKernel);
  REQUIRE(kernels.size() == 1);
  const Event& k = *kernels[0];
  CHECK(k.ts == 2000 + 1000);
  CHECK(k.dur == 3000);
  CHECK(k.corr == 42);
  CHECK(k.device == 1);
  CHECK(im.Name(k.payload.kernel.details) ==
        "regs:32 static_shared:0 dynamic_shared:0 grid:1,1,1 block:128,1,1 occ_pct:50");
  CHECK(im.Name(k.payload.kernel.op) == "model/dense/MatMul:MatMul");
  const Event* stream = im.TrackDef(k.track);
  REQUIRE(stream != nullptr);
  CHECK(stream->payload.track_def.type == TrackType::kGpuStream);
  CHECK(stream->payload.track_def.os_tid == 3);
  const auto copies = im.Kind(EventKind::kMemcpyHtoD);
  REQUIRE(copies.size() == 1);
  CHECK(copies[0]->payload.copy.bytes == 4096);
  CHECK(copies[0]->corr == 43);
  CHECK(im.Kind(EventKind::kMemset).size() == 1);
  const auto info = im.Kind(EventKind::kDeviceInfo);
  REQUIRE(info.size() == 1);
  CHECK(info[0]->device == 1);
  CHECK(info[0]->payload.device_info.sm_count == 80);
  CHECK(info[0]->payload.device_info.cc_major == 7);
  CHECK(im.report.events_out == im.events.size());
  CHECK(im.events.size() == 11);  // 7 host + step + kernel, copy, memset... + device info
  std::filesystem::remove(path);
}

TEST_CASE("xplane: steps come from the first device's Steps line, once") {
  XSpace space = SmallSpace();
  for (int d : {1, 2}) {
    XPlane* p = d == 1 ? space.mutable_planes(1) : space.add_planes();
    p->set_name("/device:GPU:" + std::to_string(d));
    PlaneBuilder b(p);
    XLine* steps = b.Line(-559038737, "Steps", 1000);
    for (int i = 0; i < 2; ++i) {
      XEvent* e = b.Event(steps, std::to_string(10 + i), int64_t{i} * 2000000, 1500000);
      b.I64(e, "group_id", i);
      b.Str(e, "step_name", std::to_string(10 + i));
    }
  }
  const std::string path = TempPath("steps.xplane.pb");
  WriteFile(path, space.SerializeAsString());
  Imported im;
  Import(path, &im);
  REQUIRE_MESSAGE(im.ok, im.error);
  const auto steps = im.Kind(EventKind::kStepMarker);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0]->payload.step.step_num == 10);
  CHECK(steps[1]->payload.step.step_num == 11);
  CHECK(steps[1]->ts == 1000 + 2000);
  CHECK(steps[1]->dur == 1500);
  CHECK(im.report.caveats.at("Steps lines of more devices (the same steps, not repeated)") == 1);
  CHECK(im.report.caveats.at("host step roots (_r) not used: the devices' Steps lines were") == 1);
  std::filesystem::remove(path);
}

TEST_CASE("xplane: gzip, and files that are not XSpaces or are cut") {
  const std::string bytes = SmallSpace().SerializeAsString();
  // .xplane.pb.gz reads as the plain file.
  const std::string gz = TempPath("small.xplane.pb.gz");
  gzFile f = gzopen(gz.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
  Imported zipped;
  Import(gz, &zipped);
  REQUIRE_MESSAGE(zipped.ok, zipped.error);
  CHECK(zipped.events.size() == 11);
  std::filesystem::remove(gz);

  const std::string path = TempPath("bad.xplane.pb");
  // Cut inside the second plane: the first plane's events are kept.
  XSpace space = SmallSpace();
  const size_t first_plane = space.planes(0).ByteSizeLong();
  WriteFile(path, bytes.substr(0, bytes.size() - 40));
  Imported cut;
  Import(path, &cut);
  CHECK(!cut.ok);
  CHECK_MESSAGE(cut.error.find("plane #") != std::string::npos, cut.error);
  CHECK(cut.error.find("truncated") != std::string::npos);
  CHECK(cut.error.starts_with(path + ": "));
  CHECK(cut.Kind(EventKind::kFrameworkOp).size() == 1);  // the host plane came through.
  CHECK(first_plane > 0);

  WriteFile(path, "this is not a protobuf at all");
  Imported text;
  Import(path, &text);
  CHECK(!text.ok);
  CHECK_MESSAGE(text.error.find("not an XSpace") != std::string::npos, text.error);

  WriteFile(path, "");
  Imported empty;
  Import(path, &empty);
  CHECK(!empty.ok);
  CHECK(empty.error == path + ": not an XSpace: no planes");
  std::filesystem::remove(path);

  Imported missing;
  Import(TempPath("absent.xplane.pb"), &missing);
  CHECK(!missing.ok);
  CHECK(missing.error.find("No such file") != std::string::npos);
}

// ../shared/data/traces: the two XPlane files, against their MANIFEST
// (XEvents, device stream events and planes) and a walk of
// `protoc --decode` output (every device event's correlation id is a host
// launch's).
using test::TracePath;

struct RealCounts {
  uint64_t xevents, device_events, devices, launches, linked;
};

void CheckReal(const std::string& relative, const RealCounts& want) {
  const std::string path = TracePath(relative);
  if (path.empty()) return;
  Imported im;
  Import(path, &im);
  REQUIRE_MESSAGE(im.ok, im.error);
  CHECK(im.report.trace_events == want.xevents);
  std::set<uint8_t> devices;
  std::set<uint32_t> launch_corr;
  uint64_t device_events = 0, linked = 0;
  for (const Event& e : im.events) {
    if (e.kind == EventKind::kRuntimeApi) launch_corr.insert(e.corr);
  }
  for (const Event& e : im.events) {
    if (!IsDeviceKind(e.kind)) continue;
    ++device_events;
    devices.insert(e.device);
    linked += launch_corr.count(e.corr);
  }
  CHECK(device_events == want.device_events);
  CHECK(devices.size() == want.devices);
  CHECK(launch_corr.size() == want.launches);
  CHECK(linked == want.linked);
}

// TensorFlow's allocator TraceMes name the op, region, data type, shape and
// requested size of each allocation (docs/semantics-tf.md §8.1): the
// memory breakdown at the peak has TensorBoard's columns (§8.4), rows of
// equal fields merged, and by op the shapes add up. An allocation without
// them falls back to its enclosing op span, or stays unattributed.
TEST_CASE("xplane: TF memory annotations give the breakdown its op, region, type and shape") {
  XSpace space;
  PlaneBuilder host(space.add_planes());
  space.mutable_planes(0)->set_name("/host:CPU");
  XLine* exec = host.Line(11, "tf_executor", 1000);
  host.Event(exec, "model/dense/MatMul:MatMul", 0, 100'000'000);  // 100 us
  auto alloc = [&](XLine* line, int64_t offset_ps, uint64_t addr, int64_t bytes, const char* op, const char* region,
                   int64_t type, const char* shape, int64_t requested) {
    XEvent* e = host.Event(line, "MemoryAllocation", offset_ps, 0);
    host.Ref(e, "allocator_name", "GPU_0_bfc");
    host.U64(e, "addr", addr);
    host.I64(e, "allocation_bytes", bytes);
    if (op != nullptr) {
      host.Str(e, "tf_op", op);
      host.Str(e, "region_type", region);
      host.I64(e, "data_type", type);
      host.Str(e, "tensor_shape", shape);
      host.I64(e, "requested_bytes", requested);
    }
  };
  alloc(exec, 1'000'000, 0x1000, 1024, "model/dense/MatMul", "output", 1, "[32,8]", 1000);
  alloc(exec, 2'000'000, 0x2000, 1024, "model/dense/MatMul", "output", 1, "[32,8]", 1000);
  alloc(exec, 3'000'000, 0x3000, 1024, "model/dense/MatMul", "output", 1, "[16,16]", 1024);
  alloc(exec, 4'000'000, 0x4000, 512, "model/dense/BiasAdd", "temp", 14, "[256]", 512);
  alloc(exec, 5'000'000, 0x5000, 256, nullptr, "", 0, "", 0);  // no annotation: the span's.
  XLine* other = host.Line(12, "allocator_thread", 1000);
  alloc(other, 6'000'000, 0x6000, 128, nullptr, "", 0, "", 0);            // no annotation, no span.
  XEvent* free = host.Event(exec, "MemoryDeallocation", 200'000'000, 0);  // after the peak.
  host.Ref(free, "allocator_name", "GPU_0_bfc");
  host.U64(free, "addr", 0x4000);
  host.I64(free, "allocation_bytes", 512);

  const std::string path = TempPath("memory.xplane.pb");
  WriteFile(path, space.SerializeAsString());
  Imported im;
  Import(path, &im);
  REQUIRE_MESSAGE(im.ok, im.error);
  const auto allocs = im.Kind(EventKind::kAlloc);
  REQUIRE(allocs.size() == 6);
  CHECK((allocs[0]->flags & kFlagAllocAnnotation) != 0);
  CHECK(im.Name(allocs[0]->corr) ==
        "model/dense/MatMul\x1foutput\x1f"
        "float\x1f[32,8]\x1f"
        "1000");
  CHECK(allocs[0]->corr == allocs[1]->corr);  // one name for equal annotations.
  CHECK(im.Name(allocs[3]->corr) ==
        "model/dense/BiasAdd\x1ftemp\x1f"
        "bfloat16\x1f[256]\x1f"
        "512");
  CHECK((allocs[4]->flags & kFlagAllocAnnotation) == 0);
  CHECK(allocs[4]->corr == 0);
  REQUIRE(im.Kind(EventKind::kFree).size() == 1);
  CHECK(im.Kind(EventKind::kFree)[0]->corr == 0);

  TraceAnalysis a;
  std::string error;
  REQUIRE_MESSAGE(AnalyzeTrace(path, AnalysesOptions{}, RenderOptions{}, &a, &error), error);
  const auto memories = nlohmann::json::parse(a.views.memory)["memories"];
  REQUIRE(memories.size() == 1);
  const auto& m = memories[0];
  CHECK(m["id"] == "GPU:0 GPU_0_bfc");
  CHECK(m["peak_bytes"] == 3 * 1024 + 512 + 256 + 128);
  CHECK(m["peak_allocations"] == 6);
  CHECK(m["peak_attributed_allocations"] == 5);
  CHECK(m["peak_attributed_bytes"] == 3 * 1024 + 512 + 256);
  auto row = [](std::string op, uint64_t bytes, uint64_t n, uint64_t requested, std::string region, std::string type,
                std::string shape) {
    return nlohmann::json{{"op", op},
                          {"bytes", bytes},
                          {"occurrences", n},
                          {"total_bytes", bytes * n},
                          {"requested_bytes", requested},
                          {"region", region},
                          {"data_type", type},
                          {"shape", shape}};
  };
  // Total bytes descending, then size, then op (and its fields).
  const nlohmann::json expected = {
      row("model/dense/MatMul", 1024, 2, 1000, "output", "float", "[32,8]"),
      row("model/dense/MatMul", 1024, 1, 1024, "output", "float", "[16,16]"),
      row("model/dense/BiasAdd", 512, 1, 512, "temp", "bfloat16", "[256]"),
      row("model/dense/MatMul:MatMul", 256, 1, 0, "", "", ""),
      row("", 128, 1, 0, "", "", ""),
  };
  CHECK(m["breakdown"] == expected);
  const nlohmann::json by_op = {
      {{"op", "model/dense/MatMul"}, {"bytes", 3072}, {"allocations", 3}},
      {{"op", "model/dense/BiasAdd"}, {"bytes", 512}, {"allocations", 1}},
      {{"op", "model/dense/MatMul:MatMul"}, {"bytes", 256}, {"allocations", 1}},
      {{"op", ""}, {"bytes", 128}, {"allocations", 1}},
  };
  CHECK(m["breakdown_by_op"] == by_op);
}

// The real TF 2.x BERT trace's allocator events (969 on GPU 4, every
// allocation annotated by TF): the breakdown at the peak equals a walk of the XSpace
// done here with the generated classes: the live allocations when the heap
// last reached its highest, grouped by op, region, data type, shape,
// requested and allocation size, largest total first.
TEST_CASE("xplane: the real TF trace's memory breakdown at the peak equals a walk of its allocator events") {
  const std::string path =
      TracePath("tensorflow__profiler/demo/plugins/profile/GPU-multi-worker/34.83.195.179_6003.xplane.pb");
  if (path.empty()) return;
  XSpace space;
  {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(space.ParseFromString(bytes));
  }
  static const char* const kTypes[] = {"INVALID",    "float",  "double",    "int32",   "uint8",   "int16",
                                       "int8",       "string", "complex64", "int64",   "bool",    "qint8",
                                       "quint8",     "qint32", "bfloat16",  "qint16",  "quint16", "uint16",
                                       "complex128", "half",   "resource",  "variant", "uint32",  "uint64"};
  struct Activity {
    uint64_t ts;
    bool alloc;
    uint64_t addr, bytes;
    std::string key;  // op, region, type, shape, requested: a row's fields.
  };
  std::vector<Activity> gpu4;
  for (const XPlane& plane : space.planes()) {
    if (!plane.name().starts_with("/host:")) continue;
    auto stat_name = [&](int64_t id) {
      const auto it = plane.stat_metadata().find(id);
      return it == plane.stat_metadata().end() ? std::string() : it->second.name();
    };
    for (const XLine& line : plane.lines()) {
      for (const XEvent& x : line.events()) {
        const auto meta = plane.event_metadata().find(x.metadata_id());
        if (meta == plane.event_metadata().end()) continue;
        const std::string& name = meta->second.name();
        if (name != "MemoryAllocation" && name != "MemoryDeallocation") continue;
        std::map<std::string, std::string> text;
        std::map<std::string, uint64_t> number;
        for (const auto* stats : {&meta->second.stats(), &x.stats()}) {
          for (const xplane::XStat& st : *stats) {
            const std::string key = stat_name(st.metadata_id());
            if (st.has_str_value()) text[key] = st.str_value();
            if (st.has_ref_value()) text[key] = stat_name(static_cast<int64_t>(st.ref_value()));
            if (st.has_int64_value()) number[key] = static_cast<uint64_t>(st.int64_value());
            if (st.has_uint64_value()) number[key] = st.uint64_value();
          }
        }
        if (text["allocator_name"] != "GPU_4_bfc") continue;
        std::string key = text["tf_op"] + '\x1f' + text["region_type"] + '\x1f' +
                          (number.count("data_type") ? kTypes[number["data_type"]] : "") + '\x1f' +
                          text["tensor_shape"] + '\x1f' + std::to_string(number["requested_bytes"]);
        gpu4.push_back({static_cast<uint64_t>(line.timestamp_ns()) + static_cast<uint64_t>(x.offset_ps()) / 1000,
                        name == "MemoryAllocation", number["addr"], number["allocation_bytes"], std::move(key)});
      }
    }
  }
  REQUIRE(gpu4.size() == 969);
  const auto allocs = std::count_if(gpu4.begin(), gpu4.end(), [](const Activity& x) { return x.alloc; });
  std::stable_sort(gpu4.begin(), gpu4.end(), [](const Activity& a, const Activity& b) { return a.ts < b.ts; });
  std::map<uint64_t, std::pair<uint64_t, std::string>> live, at_peak;
  uint64_t heap = 0, peak = 0;
  for (const Activity& a : gpu4) {
    if (a.alloc) {
      if (const auto it = live.find(a.addr); it != live.end()) heap -= it->second.first;
      live[a.addr] = {a.bytes, a.key};
      heap += a.bytes;
    } else if (const auto it = live.find(a.addr); it != live.end()) {
      heap -= it->second.first;
      live.erase(it);
    }
    if (heap >= peak) peak = heap, at_peak = live;
  }
  std::map<std::pair<std::string, uint64_t>, uint64_t> grouped;
  for (const auto& [addr, v] : at_peak) ++grouped[{v.second, v.first}];
  std::vector<std::tuple<uint64_t, uint64_t, std::string, uint64_t>> rows;  // total, size, key, count
  for (const auto& [k, n] : grouped) rows.emplace_back(k.second * n, k.second, k.first, n);
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
    if (std::get<1>(a) != std::get<1>(b)) return std::get<1>(a) > std::get<1>(b);
    return std::get<2>(a) < std::get<2>(b);
  });

  TraceAnalysis a;
  std::string error;
  REQUIRE_MESSAGE(AnalyzeTrace(path, AnalysesOptions{}, RenderOptions{}, &a, &error), error);
  const auto memories = nlohmann::json::parse(a.views.memory)["memories"];
  const nlohmann::json* m = nullptr;
  for (const auto& x : memories) {
    if (x["id"] == "GPU:4 GPU_4_bfc") m = &x;
    // TF's pinned host memory for copies is the host's, not a GPU 0's.
    if (x["allocator"] == "gpu_host_bfc") CHECK(x["host"] == true);
  }
  REQUIRE(m != nullptr);
  CHECK((*m)["num_allocations"] == allocs);
  CHECK((*m)["num_deallocations"] == 969 - allocs);
  CHECK((*m)["peak_bytes"] == peak);
  CHECK(peak == 2'195'516'672);
  CHECK((*m)["peak_allocations"] == at_peak.size());
  CHECK((*m)["peak_attributed_allocations"] == at_peak.size());  // every one has its tf_op.
  const auto& breakdown = (*m)["breakdown"];
  REQUIRE(breakdown.size() == std::min<size_t>(rows.size(), 50));
  for (size_t i = 0; i < breakdown.size(); ++i) {
    CAPTURE(i);
    const auto& r = breakdown[i];
    const std::string key = r["op"].get<std::string>() + '\x1f' + r["region"].get<std::string>() + '\x1f' +
                            r["data_type"].get<std::string>() + '\x1f' + r["shape"].get<std::string>() + '\x1f' +
                            std::to_string(r["requested_bytes"].get<uint64_t>());
    CHECK(key == std::get<2>(rows[i]));
    CHECK(r["bytes"] == std::get<1>(rows[i]));
    CHECK(r["occurrences"] == std::get<3>(rows[i]));
  }
  // The largest: the word embeddings' half-precision cast, 62,509,056 B.
  CHECK(breakdown[0]["op"] == "replica_4/bert_span_labeler/bert_encoder_1/word_embeddings/GatherV2/Cast");
  CHECK(breakdown[0]["region"] == "output");
  CHECK(breakdown[0]["data_type"] == "half");
}

TEST_CASE("xplane: the real TensorFlow and JAX files, against their MANIFEST") {
  // TF 2.x BERT on 8 GPUs (kernels on 2 of them), one step.
  CheckReal("tensorflow__profiler/demo/plugins/profile/GPU-multi-worker/34.83.195.179_6003.xplane.pb",
            {23128, 1556, 3, 1556, 1556});
  // JAX on 8 MI300X (ROCm): no step markers.
  CheckReal("AMD-AGI__TraceLens/tests/traces/mi300/jax_conv_minimal_08/tw003.xplane.pb", {3650, 235, 8, 234, 235});

  const std::string tf =
      TracePath("tensorflow__profiler/demo/plugins/profile/GPU-multi-worker/34.83.195.179_6003.xplane.pb");
  if (tf.empty()) return;
  TraceAnalysis a;
  std::string error;
  REQUIRE_MESSAGE(AnalyzeTrace(tf, AnalysesOptions{}, RenderOptions{}, &a, &error), error);
  const auto overview = nlohmann::json::parse(a.views.overview);
  // The Steps line: one step, "0", of 19,865,491,000 ps.
  CHECK(overview["summary"]["steps"] == 1);
  CHECK(overview["summary"]["step_time_ms_avg"].get<double>() == doctest::Approx(19.865491).epsilon(1e-9));
  // Every kernel has its TF op (the outermost annotation, "level 0").
  const auto kernels = nlohmann::json::parse(a.views.kernel_stats);
  uint64_t with_op = 0, rows = 0;
  for (const auto& r : kernels["rows"]) {
    ++rows;
    with_op += r["op_name"].get<std::string>().find(':') != std::string::npos;
  }
  CHECK(rows > 0);
  CHECK(with_op == rows);
}

}  // namespace
}  // namespace liveprof::xplane_test
