#include "import/chrome_trace.h"

#include <simdjson.h>
#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include <charconv>
#include <string_view>
#include <unordered_map>

#include "import/decimal.h"
#include "import/json_splitter.h"
#include "stream/alloc_annotation.h"

namespace liveprof {
namespace {

namespace od = simdjson::ondemand;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// A scalar's text: a string's contents, a number's or literal's token, ""
// for an object or array. On-demand parsing checks only what it reads, so
// each scalar read is checked here: *bad is set on malformed JSON.
std::string_view Text(od::value v, bool* bad) {
  od::json_type t;
  if (v.type().get(t)) {
    *bad = true;
    return {};
  }
  switch (t) {
    case od::json_type::string: {
      std::string_view s;
      if (v.get_string().get(s)) *bad = true;
      return s;
    }
    case od::json_type::number: {
      const std::string_view raw = Trim(v.raw_json_token());
      double d;
      if (v.get_double().get(d)) *bad = true;
      return raw;
    }
    case od::json_type::boolean: {
      const std::string_view raw = Trim(v.raw_json_token());
      bool b;
      if (v.get_bool().get(b)) *bad = true;
      return raw;
    }
    case od::json_type::null: {
      bool is_null = false;
      if (v.is_null().get(is_null) || !is_null) *bad = true;
      return {};
    }
    default: return {};
  }
}

uint64_t U64(std::string_view text) {
  uint64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

int64_t I64(std::string_view text) {
  int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

// A flow or correlation id: a number, or a string ("0x402", "abc") hashed.
uint32_t Id32(std::string_view text) {
  uint64_t v = 0;
  const bool hex = text.starts_with("0x") || text.starts_with("0X");
  const char* first = text.data() + (hex ? 2 : 0);
  const auto [end, ec] = std::from_chars(first, text.data() + text.size(), v, hex ? 16 : 10);
  if (ec == std::errc() && end == text.data() + text.size()) return static_cast<uint32_t>(v ^ (v >> 32));
  uint32_t h = 2166136261u;  // FNV-1a
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

// What liveprof makes of a ph X category.
enum class Cat { kOp, kAnnotation, kRuntime, kDriver, kKernel, kMemcpy, kMemset, kStep, kInput, kOther, kDrop };
Cat Classify(std::string_view cat) {
  // liveprof's own (chrome_export.h): kinds with no Kineto form.
  if (cat == "liveprof_step") return Cat::kStep;
  if (cat == "liveprof_input") return Cat::kInput;
  if (cat == "Operator" || cat == "cpu_op") return Cat::kOp;
  if (cat == "user_annotation") return Cat::kAnnotation;
  if (cat == "Runtime" || cat == "cuda_runtime") return Cat::kRuntime;
  if (cat == "cuda_driver") return Cat::kDriver;  // cuLaunchKernel(Ex): Triton's launches.
  if (cat == "Kernel" || cat == "kernel") return Cat::kKernel;
  if (cat == "Memcpy" || cat == "gpu_memcpy") return Cat::kMemcpy;
  if (cat == "Memset" || cat == "gpu_memset") return Cat::kMemset;
  // Trace: the profiler's own span over the whole capture (no role in the
  // PyTorch plugin's breakdown either).
  if (cat == "Trace" || cat == "python_function" || cat == "gpu_user_annotation" || cat == "cuda_sync" ||
      cat == "cuda_profiler_range" || cat == "fwdbwd" || cat == "ac2g") {
    return Cat::kDrop;
  }
  return Cat::kOther;
}

// The members of one trace event that liveprof reads.
struct Fields {
  std::string_view ph, cat, name, pid, tid, ts, dur, id, scope;
  bool has_dur = false;
  // args
  std::string_view external_id, correlation, device, stream, bytes, addr, device_type, device_id;
  std::string_view regs, shared, occupancy, blocks_per_sm, warps_per_sm, m_name, step_num, stage;
  std::string_view allocator, op_name, alloc_op, region, data_type, shape,
      requested;  // liveprof's own (chrome_export.h).
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  bool has_grid = false, has_block = false;
  std::vector<std::pair<std::string_view, double>> counters;
};

}  // namespace

void AddCount(std::map<std::string, uint64_t, std::less<>>& counts, std::string_view key, uint64_t n) {
  if (auto it = counts.find(key); it != counts.end()) {
    it->second += n;
  } else {
    counts.emplace(std::string(key), n);
  }
}

EventKind CopyKindFromName(std::string_view name) {
  auto says = [&](std::string_view a, std::string_view b) {
    return name.find(a) != std::string_view::npos || name.find(b) != std::string_view::npos;
  };
  if (says("HtoD", "H2D")) return EventKind::kMemcpyHtoD;
  if (says("DtoH", "D2H")) return EventKind::kMemcpyDtoH;
  if (says("DtoD", "D2D")) return EventKind::kMemcpyDtoD;
  if (says("HtoH", "H2H")) return EventKind::kMemcpyHtoH;
  if (says("PtoP", "P2P")) return EventKind::kMemcpyPtoP;
  return EventKind::kMemcpyOther;
}

uint64_t ImportReport::dropped_total() const {
  uint64_t n = 0;
  for (const auto& [_, c] : dropped) n += c;
  return n;
}

struct ChromeTraceImporter::Parser {
  explicit Parser(NameTable* n) : names(n) {}

  NameTable* names;
  od::parser json;
  ImportReport* report = nullptr;
  std::vector<Event> events;
  std::vector<Event> defs;
  struct Track {
    TrackInfo info;
    std::vector<std::pair<uint64_t, Event>> open;  // B events waiting for their E.
  };
  std::vector<Track> tracks{1};  // id 0: no track.
  std::unordered_map<std::string, TrackId> by_key;
  uint32_t names_sent = 0;
  size_t tracks_sent = 1;
  std::string key;  // scratch
  // Keep(): the pids of GPU activity and of process_name events, as written.
  bool keep = false;
  std::set<std::string, std::less<>> gpu_pids, named_pids;
  void Remember(std::set<std::string, std::less<>>& pids, std::string_view pid) {
    if (pids.find(pid) == pids.end()) pids.emplace(pid);
  }
  bool saw_table = false;  // an element with "cols" (a TensorBoard profiler table).
  // An op's External id -> its name, for the kernels it launched (their
  // "external id"): Kineto writes the CPU ops before the GPU activity.
  // 16-32 bytes per op, at most kMaxOps of them. boost::unordered_flat_map:
  // faster than U64Map here (bench/RESULTS.md).
  static constexpr size_t kMaxOps = size_t{1} << 23;
  boost::unordered_flat_map<uint64_t, uint64_t> op_of_external;

  void RememberOp(uint64_t id, NameId name) {
    if (op_of_external.size() < kMaxOps) {
      op_of_external.insert_or_assign(id, name);
    } else {
      AddCount(report->caveats, "ops beyond 8 Mi remembered for kernel-op links");
    }
  }
  // The correlation ids of the launch calls (runtime and driver): a second
  // call with one is counted (a kernel with two flows); the step assembler
  // joins the kernel once. Same cap as the ops.
  boost::unordered_flat_set<uint32_t> launch_corrs;
  void RememberLaunch(uint32_t corr) {
    if (corr == 0 || launch_corrs.size() >= kMaxOps) return;
    if (!launch_corrs.insert(corr).second) {
      AddCount(report->caveats, "launch calls sharing a correlation id (a kernel with two launch flows): joined once");
    }
  }
  NameId OpOf(uint64_t id) {
    const auto it = op_of_external.find(id);
    return it != op_of_external.end() ? static_cast<NameId>(it->second) : 0;
  }

  TrackId HostTrack(std::string_view pid, std::string_view tid) {
    key.assign(pid).append(1, '/').append(tid);
    if (auto it = by_key.find(key); it != by_key.end()) return it->second;
    Track t;
    t.info.type = TrackType::kHostThread;
    t.info.os_id = U64(tid);
    t.info.name = names->Intern("thread " + std::string(tid));
    return Add(std::move(t));
  }

  TrackId GpuTrack(uint8_t device, std::string_view stream) {
    key.assign("gpu/").append(std::to_string(device)).append(1, '/').append(stream);
    if (auto it = by_key.find(key); it != by_key.end()) return it->second;
    Track t;
    t.info.type = TrackType::kGpuStream;
    t.info.device = device;
    t.info.os_id = U64(stream);
    t.info.name = names->Intern("GPU " + std::to_string(device) + " stream " + std::string(stream));
    return Add(std::move(t));
  }

  TrackId Add(Track t) {
    const auto id = static_cast<TrackId>(tracks.size());
    tracks.push_back(std::move(t));
    by_key.emplace(key, id);
    return id;
  }

  void Definitions() {
    for (const uint32_t n = names->size(); names_sent < n; ++names_sent) {
      defs.push_back(NameDefEvent(names_sent, names->Get(names_sent)));
    }
    for (; tracks_sent < tracks.size(); ++tracks_sent) {
      defs.push_back(TrackDefEvent(static_cast<TrackId>(tracks_sent), tracks[tracks_sent].info));
    }
  }

  void Drop(std::string_view why) { AddCount(report->dropped, why); }

  // The field an args member fills, by its first letter and then the whole
  // key: most of Kineto's args are none of these, and one compare rejects
  // them (a chain of compares per member cost the import ~10 % of its speed).
  static std::string_view* ArgField(std::string_view k, Fields& f) {
    if (k.empty()) return nullptr;
    switch (k[0]) {
      // Ops have "External id"; the kernels of old traces "external id".
      case 'E': return k == "External id" ? &f.external_id : nullptr;
      case 'e': return k == "external id" ? &f.external_id : k == "est. achieved occupancy %" ? &f.occupancy : nullptr;
      case 'c': return k == "correlation" ? &f.correlation : nullptr;
      case 'd': return k == "device" ? &f.device : nullptr;
      case 's':
        return k == "stream"          ? &f.stream
               : k == "shared memory" ? &f.shared
               : k == "step_num"      ? &f.step_num
               : k == "stage"         ? &f.stage
                                      : nullptr;
      case 'b': return k == "bytes" ? &f.bytes : k == "blocks per SM" ? &f.blocks_per_sm : nullptr;
      case 'w': return k == "warps per SM" ? &f.warps_per_sm : nullptr;
      case 'B': return k == "Bytes" ? &f.bytes : nullptr;
      case 'A': return k == "Addr" ? &f.addr : k == "Allocator" ? &f.allocator : nullptr;
      case 'f': return k == "framework op" ? &f.op_name : nullptr;
      case 'D':
        return k == "Device Type" ? &f.device_type
               : k == "Device Id" ? &f.device_id
               : k == "Data Type" ? &f.data_type
                                  : nullptr;
      case 'O': return k == "Op" ? &f.alloc_op : nullptr;
      case 'R': return k == "Region" ? &f.region : k == "Requested Bytes" ? &f.requested : nullptr;
      case 'S': return k == "Shape" ? &f.shape : nullptr;
      case 'r': return k == "registers per thread" ? &f.regs : nullptr;
      case 'n': return k == "name" ? &f.m_name : nullptr;
      default: return nullptr;
    }
  }

  bool ReadArgs(od::object args, Fields& f, bool* bad) {
    for (auto field : args) {
      std::string_view k;
      if (field.unescaped_key().get(k)) return false;
      od::value v;
      if (field.value().get(v)) return false;
      if (f.ph == "C") {
        double d;
        if (!v.get_double().get(d)) f.counters.emplace_back(k, d);
        continue;
      }
      std::string_view* slot = ArgField(k, f);
      if (f.ph.empty()) {
        // "args" before "ph" (members come in any order): keep the numbers
        // as a counter's too, in case it is one.
        od::json_type type;
        if (!v.type().get(type) && type == od::json_type::number) {
          const std::string_view text = Text(v, bad);
          double d = 0;
          if (std::from_chars(text.data(), text.data() + text.size(), d).ec == std::errc()) {
            f.counters.emplace_back(k, d);
          }
          if (slot) *slot = text;
          continue;
        }
      }
      if (slot) {
        *slot = Text(v, bad);
      } else if (k == "grid" || k == "block") {
        uint32_t* out = k == "grid" ? f.grid : f.block;
        od::array a;
        if (v.get_array().get(a)) continue;
        size_t i = 0;
        for (auto x : a) {
          uint64_t n;
          if (i < 3 && !x.get_uint64().get(n)) out[i] = static_cast<uint32_t>(n);
          ++i;
        }
        (k == "grid" ? f.has_grid : f.has_block) = true;
      }
    }
    return true;
  }

  // Parses one batch ("[e,...]"); false on malformed JSON.
  bool Batch(std::string_view text, std::string* error, uint64_t first_index) {
    od::document doc;
    if (auto err = json.iterate(text.data(), text.size(), text.size() + TraceJsonSplitter::kPadding).get(doc)) {
      *error = std::string("invalid JSON in trace events from #") + std::to_string(first_index + 1) + ": " +
               simdjson::error_message(err);
      return false;
    }
    od::array arr;
    if (auto err = doc.get_array().get(arr)) {
      *error = std::string("invalid JSON: ") + simdjson::error_message(err);
      return false;
    }
    uint64_t index = first_index;
    for (auto element : arr) {
      ++index;
      od::object obj;
      if (element.get_object().get(obj)) {
        od::value v;
        if (element.get(v)) {
          *error = "invalid JSON in trace event #" + std::to_string(index);
          return false;
        }
        Drop("not an object");
        continue;
      }
      Fields f;
      bool ok = true;
      bool malformed = false;
      bool* bad = &malformed;
      for (auto field : obj) {
        std::string_view k;
        od::value v;
        if (field.unescaped_key().get(k) || field.value().get(v)) {
          ok = false;
          break;
        }
        // By length first: every event has these members, in any order.
        const size_t n = k.size();
        if (n == 2 && k == "ph") f.ph = Text(v, bad);
        else if (n == 2 && k == "ts") f.ts = Text(v, bad);
        else if (n == 3 && k == "cat") f.cat = Text(v, bad);
        else if (n == 3 && k == "pid") f.pid = Text(v, bad);
        else if (n == 3 && k == "tid") f.tid = Text(v, bad);
        else if (n == 3 && k == "dur") f.dur = Text(v, bad), f.has_dur = true;
        else if (n == 4 && k == "name") f.name = Text(v, bad);
        else if (n == 2 && k == "id") f.id = Text(v, bad);
        else if (n == 1 && k == "s") f.scope = Text(v, bad);
        else if (n == 4 && k == "cols") saw_table = true;
        else if (n == 4 && k == "args") {
          od::object args;
          if (!v.get_object().get(args) && !ReadArgs(args, f, bad)) ok = false;
        }
      }
      if (!ok || malformed) {
        *error = "invalid JSON in trace event #" + std::to_string(index) + " (a value that does not parse)";
        return false;
      }
      Convert(f);
    }
    return true;
  }

  void Convert(const Fields& f) {
    AddCount(report->phases, f.ph);
    if (f.ph == "M") return Metadata(f);
    const std::optional<int64_t> ts = MicrosTextToNs(f.ts);
    if (!ts || *ts < 0) return Drop("no usable ts");
    Event e;
    e.ts = static_cast<uint64_t>(*ts);
    e.name = names->Intern(f.name);
    if (f.ph == "X") {
      AddCount(report->categories, f.cat);
      const std::optional<int64_t> dur = f.has_dur ? MicrosTextToNs(f.dur) : std::optional<int64_t>(0);
      if (!dur || *dur < 0) return Drop("X without a usable dur");
      e.dur = static_cast<uint64_t>(*dur);
      return Complete(f, e);
    }
    if (f.ph == "B") {
      e.kind = EventKind::kHostSpan;
      e.track = HostTrack(f.pid, f.tid);
      tracks[e.track].open.emplace_back(e.ts, e);
      return;
    }
    if (f.ph == "E") {
      auto& open = tracks[HostTrack(f.pid, f.tid)].open;
      if (open.empty()) return Drop("E without B");
      Event b = open.back().second;
      open.pop_back();
      if (e.ts < b.ts) return Drop("E before its B");
      b.dur = e.ts - b.ts;
      return Emit(b);
    }
    if (f.ph == "i" || f.ph == "I") {
      if (f.name == "[memory]") return Memory(f, e);
      e.kind = EventKind::kInstant;
      e.track = HostTrack(f.pid, f.tid);
      return Emit(e);
    }
    if (f.ph == "C") {
      e.kind = EventKind::kCounter;
      e.track = HostTrack(f.pid, f.tid);
      for (const auto& [k, value] : f.counters) {
        e.name = names->Intern(std::string(f.name) + "/" + std::string(k));
        e.payload.counter.value = value;
        Emit(e);
      }
      if (f.counters.empty()) Drop("C without a numeric arg");
      return;
    }
    if (f.ph == "s" || f.ph == "t" || f.ph == "f") {
      if (f.cat == "ac2g" || (f.cat == "async" && f.name == "launch")) {
        return Drop("launch flows (the correlation ids carry the link)");
      }
      e.kind = EventKind::kFlow;
      e.track = HostTrack(f.pid, f.tid);
      e.corr = Id32(f.id);
      e.sub = f.ph == "s" ? 0 : f.ph == "t" ? 1 : 2;
      return Emit(e);
    }
    Drop("phase " + std::string(f.ph) + " (not imported)");
  }

  void Complete(const Fields& f, Event& e) {
    const Cat c = Classify(f.cat);
    // By category: runtime calls and ops may carry a "stream" arg too (ROCm's
    // hipLaunchKernel, Triton's ops) and stay on the host.
    const bool gpu =
        c == Cat::kKernel || c == Cat::kMemcpy || c == Cat::kMemset || (c == Cat::kOther && !f.stream.empty());
    if (c == Cat::kDrop) return Drop("category " + std::string(f.cat) + " (not analysed)");
    if (gpu) {
      if (keep) Remember(gpu_pids, f.pid);
      e.device = static_cast<uint8_t>(U64(f.device.empty() ? f.pid : f.device));
      e.track = GpuTrack(e.device, f.stream.empty() ? f.tid : f.stream);
      e.corr = static_cast<uint32_t>(U64(f.correlation));
      switch (c) {
        case Cat::kKernel: {
          e.kind = EventKind::kKernel;
          std::string d = "regs:" + std::string(f.regs.empty() ? "0" : f.regs) +
                          " static_shared:" + std::string(f.shared.empty() ? "0" : f.shared) + " dynamic_shared:0";
          if (f.has_grid)
            d += " grid:" + std::to_string(f.grid[0]) + "," + std::to_string(f.grid[1]) + "," +
                 std::to_string(f.grid[2]);
          if (f.has_block)
            d += " block:" + std::to_string(f.block[0]) + "," + std::to_string(f.block[1]) + "," +
                 std::to_string(f.block[2]);
          if (!f.occupancy.empty()) d += " occ_pct:" + std::string(f.occupancy);
          if (!f.blocks_per_sm.empty()) d += " blocks_per_sm:" + std::string(f.blocks_per_sm);
          if (!f.warps_per_sm.empty()) d += " warps_per_sm:" + std::string(f.warps_per_sm);
          e.payload.kernel.details = names->Intern(d);
          if (!f.external_id.empty()) {
            e.payload.kernel.op = OpOf(U64(f.external_id));
            if (e.payload.kernel.op == 0)
              AddCount(report->caveats, "kernel whose op is not before it (no kernel-op link)");
          } else if (!f.op_name.empty()) {
            e.payload.kernel.op = names->Intern(f.op_name);
          }
          break;
        }
        case Cat::kMemcpy:
          e.kind = CopyKindFromName(f.name);
          e.payload.copy.bytes = U64(f.bytes);
          break;
        case Cat::kMemset:
          e.kind = EventKind::kMemset;
          e.payload.copy.bytes = U64(f.bytes);
          break;
        default: return Drop("other spans on GPU streams");
      }
      return Emit(e);
    }
    e.track = HostTrack(f.pid, f.tid);
    switch (c) {
      case Cat::kOp:
        e.kind = EventKind::kFrameworkOp;
        e.corr = static_cast<uint32_t>(U64(f.external_id));
        if (!f.external_id.empty()) RememberOp(U64(f.external_id), e.name);
        break;
      case Cat::kRuntime:
      case Cat::kDriver:
        e.kind = EventKind::kRuntimeApi;
        e.sub = static_cast<uint8_t>(c == Cat::kDriver ? ApiLayer::kDriver : ApiLayer::kRuntime);
        e.corr = static_cast<uint32_t>(U64(f.correlation));
        RememberLaunch(e.corr);
        break;
      case Cat::kStep:
        e.kind = EventKind::kStepMarker;
        e.payload.step.step_num = I64(f.step_num);
        break;
      case Cat::kInput:
        e.kind = EventKind::kInputSpan;
        e.sub = static_cast<uint8_t>(U64(f.stage));
        break;
      default: e.kind = EventKind::kHostSpan; break;
    }
    Emit(e);
  }

  // Kineto's "deviceProperties": [{"id", "name", "totalGlobalMem",
  // "computeMajor", "computeMinor", "numSms", ...}] become kDeviceInfo
  // events (the GPU's name, memory and compute capability in every view).
  void DeviceProperties(std::string_view value) {
    const simdjson::padded_string text(value);
    od::parser local;
    od::document doc;
    od::array gpus;
    if (local.iterate(text).get(doc) || doc.get_array().get(gpus)) {
      return AddCount(report->caveats, "deviceProperties that is not an array (ignored)");
    }
    for (auto element : gpus) {
      od::object gpu;
      if (element.get_object().get(gpu)) continue;
      Event e;
      e.kind = EventKind::kDeviceInfo;
      bool has_id = false;
      for (auto field : gpu) {
        std::string_view k;
        od::value v;
        if (field.unescaped_key().get(k) || field.value().get(v)) break;
        uint64_t n = 0;
        std::string_view str;
        if (k == "name" && !v.get_string().get(str)) e.name = names->Intern(str);
        else if (v.get_uint64().get(n)) continue;  // the numbers below only.
        else if (k == "id") e.device = static_cast<uint8_t>(n), has_id = true;
        else if (k == "totalGlobalMem") e.payload.device_info.memory_bytes = n;
        else if (k == "numSms") e.payload.device_info.sm_count = static_cast<uint32_t>(n);
        else if (k == "computeMajor") e.payload.device_info.cc_major = static_cast<uint8_t>(n);
        else if (k == "computeMinor") e.payload.device_info.cc_minor = static_cast<uint8_t>(n);
      }
      if (has_id) Emit(e);
    }
  }

  // Kineto's "distributedInfo": {"backend", "rank", "world_size", ...},
  // kept (validated, minified) for the report and for export.
  void Distributed(std::string_view value) {
    simdjson::dom::parser local;
    simdjson::dom::object info;
    if (local.parse(value.data(), value.size()).get_object().get(info)) {
      return AddCount(report->caveats, "distributedInfo that is not a JSON object (ignored)");
    }
    report->distributed = simdjson::minify(info);
    int64_t n = 0;
    if (!info["rank"].get_int64().get(n)) report->rank = n;
    if (!info["world_size"].get_int64().get(n)) report->world_size = n;
  }

  void Memory(const Fields& f, Event& e) {
    const int64_t bytes = I64(f.bytes);
    if (bytes == 0) return Drop("[memory] without Bytes");
    const bool cuda = f.device_type == "1";
    const std::string id = f.device_id.empty() ? "0" : std::string(f.device_id);
    e.kind = bytes > 0 ? EventKind::kAlloc : EventKind::kFree;
    e.name = !f.allocator.empty() ? names->Intern(f.allocator) : names->Intern(cuda ? "CUDA:" + id : "CPU:" + id);
    e.sub = static_cast<uint8_t>(cuda ? MemoryKind::kDevice : MemoryKind::kHost);
    e.device = cuda ? static_cast<uint8_t>(U64(id)) : 0;
    e.track = HostTrack(f.pid, f.tid);
    e.payload.memory.address = U64(f.addr);
    e.payload.memory.bytes = bytes > 0 ? static_cast<uint64_t>(bytes) : 0 - static_cast<uint64_t>(bytes);
    if (f.addr.empty()) AddCount(report->caveats, "[memory] without Addr (address 0)");
    const std::string note = FormatAllocAnnotation({f.alloc_op, f.region, f.data_type, f.shape, U64(f.requested)});
    if (bytes > 0 && !note.empty()) e.corr = names->Intern(note), e.flags |= kFlagAllocAnnotation;
    Emit(e);
  }

  void Metadata(const Fields& f) {
    if (keep && f.name == "process_name") Remember(named_pids, f.pid);
    if (f.name != "thread_name" || f.m_name.empty()) return;
    const TrackId t = HostTrack(f.pid, f.tid);
    tracks[t].info.name = names->Intern(f.m_name);
    if (t < tracks_sent) tracks_sent = t;  // defined again with its name.
  }

  void Emit(const Event& e) {
    events.push_back(e);
    ++report->events_out;
  }
};

ChromeTraceImporter::ChromeTraceImporter() : ChromeTraceImporter(nullptr) {}
ChromeTraceImporter::ChromeTraceImporter(NameTable* names)
    : names_(names ? names : &own_names_), parser_(std::make_unique<Parser>(names_)) {}
ChromeTraceImporter::~ChromeTraceImporter() = default;

void ChromeTraceImporter::Keep(KeepText keep) {
  keep_ = std::move(keep);
  parser_->keep = static_cast<bool>(keep_.events) || static_cast<bool>(keep_.member);
}

std::vector<std::string> ChromeTraceImporter::UnnamedGpuProcesses() const {
  std::vector<std::string> out;
  for (const std::string& pid : parser_->gpu_pids) {
    if (parser_->named_pids.find(pid) == parser_->named_pids.end()) out.push_back(pid);
  }
  return out;
}

bool ChromeTraceImporter::Run(const std::function<bool(std::string_view*)>& next_chunk, const Sink& sink,
                              ImportReport* report, std::string* error) {
  Parser& p = *parser_;
  p.report = report;
  std::string batch_error;
  auto flush = [&] {
    p.Definitions();
    if (!p.defs.empty() || !p.events.empty()) sink(p.defs, p.events);
    p.defs.clear();
    p.events.clear();
  };
  TraceJsonSplitter splitter(
      [&](std::string_view json, size_t count) {
        const uint64_t first = report->trace_events;
        report->trace_events += count;
        const bool ok = p.Batch(json, &batch_error, first);
        if (ok && keep_.events) keep_.events(json.substr(1, json.size() - 2), count);  // (without [ ])
        flush();
        return ok;
      },
      [&](std::string_view key, std::string_view value) {
        if (keep_.member) keep_.member(key, value);
        if (key == "baseTimeNanoseconds") {
          report->has_base_time = true;
          report->base_time_ns = I64(Trim(value));
        } else if (key == "schemaVersion") {
          report->schema = std::string(Trim(value));
        } else if (key == "distributedInfo") {
          p.Distributed(value);
        } else if (key == "deviceProperties") {
          p.DeviceProperties(value);
          flush();
        }
        return true;
      });
  std::string_view chunk;
  bool ok = true;
  while (ok && next_chunk(&chunk) && !chunk.empty()) {
    report->bytes += chunk.size();
    ok = splitter.Feed(chunk);
  }
  if (ok) ok = splitter.Finish();
  for (const auto& t : p.tracks) {
    if (!t.open.empty()) AddCount(report->dropped, "B without E", t.open.size());
  }
  flush();
  if (!ok) *error = batch_error.empty() ? splitter.error() : batch_error;
  // A JSON array of something else (tables, tuples) is not a trace.
  if (ok && report->trace_events > 0) {
    const auto it = report->dropped.find("not an object");
    if (it != report->dropped.end() && it->second == report->trace_events) {
      *error =
          "not a Chrome trace: none of its " + std::to_string(report->trace_events) + " trace events is a JSON object";
      return false;
    }
    const auto no_phase = report->phases.find("");
    if (no_phase != report->phases.end() && no_phase->second == report->trace_events) {
      *error = "not a Chrome trace: none of its " + std::to_string(report->trace_events) +
               " trace events has a phase (\"ph\")" +
               (p.saw_table ? "; it holds tables (\"cols\", \"rows\"): the output of a TensorBoard "
                              "profiler tool, not a trace"
                            : "");
      return false;
    }
    if (report->events_out == 0) {  // a trace, but of nothing liveprof reads: say what it holds.
      *error = "nothing to import: none of its " + std::to_string(report->trace_events) +
               " trace events is of a kind liveprof reads (";
      bool first = true;
      for (const auto& [reason, n] : report->dropped) {
        *error += (first ? "" : ", ") + reason + ": " + std::to_string(n);
        first = false;
      }
      *error += ")";
      return false;
    }
  }
  return ok;
}

}  // namespace liveprof
