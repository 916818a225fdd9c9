#include "import/chrome_export.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>

#include "base/json_writer.h"
#include "import/trace_file.h"
#include "stream/alloc_annotation.h"

namespace liveprof {

namespace {

constexpr size_t kFlushBytes = size_t{1} << 20;
// Kineto's process_sort_index of GPU N: N past its largest pid.
constexpr int64_t kGpuSortIndex = 5'000'000;

// ns -> Chrome's µs, exactly: "1234.567".
void AppendMicros(std::string* out, uint64_t ns) {
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
  out->append(buf, static_cast<size_t>(n));
}

// The value after "key:" in a kernel's details ("regs:72 static_shared:4096
// ... grid:100,2,1"), or "".
std::string_view Detail(std::string_view details, std::string_view key) {
  size_t at = 0;
  while ((at = details.find(key, at)) != std::string_view::npos) {
    if ((at == 0 || details[at - 1] == ' ') && at + key.size() < details.size() && details[at + key.size()] == ':') {
      const size_t begin = at + key.size() + 1;
      const size_t end = details.find(' ', begin);
      return details.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
    }
    at += key.size();
  }
  return {};
}

// What the importer looks for in a copy's name ("" when nothing).
std::string_view CopyDirection(EventKind k) {
  switch (k) {
    case EventKind::kMemcpyHtoD: return "HtoD";
    case EventKind::kMemcpyDtoH: return "DtoH";
    case EventKind::kMemcpyDtoD: return "DtoD";
    case EventKind::kMemcpyHtoH: return "HtoH";
    case EventKind::kMemcpyPtoP: return "PtoP";
    default: return "";
  }
}

}  // namespace

struct ChromeTraceWriter::Deflater {
  z_stream z{};
  bool ready = false;
  ~Deflater() {
    if (ready) deflateEnd(&z);
  }
};

ChromeTraceWriter::ChromeTraceWriter() = default;

ChromeTraceWriter::~ChromeTraceWriter() { Abort(); }

bool ChromeTraceWriter::Open(const std::string& path, std::string* error) {
  // Beside `path` (a rename stays on its file system), a name no other
  // writer uses; 0666 less the umask, as fopen would create it.
  static std::atomic<uint32_t> serial{0};
  path_ = path;
  // Not a regular file (/dev/stdout, a FIFO): written as it is, no rename.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    file_ = std::fopen(path.c_str(), "wb");
    if (file_ == nullptr) {
      *error = path + ": " + std::strerror(errno);
      return false;
    }
    return Start(path.ends_with(".gz"), path, error);
  }
  temp_path_ = path + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
  const int fd = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd >= 0) file_ = fdopen(fd, "wb");
  if (file_ == nullptr) {
    *error = path + ": " + std::strerror(errno);
    if (fd >= 0) {
      ::close(fd);
      std::remove(temp_path_.c_str());
    }
    temp_path_.clear();
    return false;
  }
  return Start(path.ends_with(".gz"), path, error);
}

void ChromeTraceWriter::Abort() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  if (!temp_path_.empty()) std::remove(temp_path_.c_str());
  temp_path_.clear();
}

bool ChromeTraceWriter::OpenString(std::string* out, bool gzip, std::string* error) {
  out->clear();
  return OpenSink(
      [out](std::string_view piece) {
        out->append(piece);
        return true;
      },
      gzip, error);
}

bool ChromeTraceWriter::OpenSink(std::function<bool(std::string_view)> sink, bool gzip, std::string* error) {
  sink_ = std::move(sink);
  return Start(gzip, "the export", error);
}

bool ChromeTraceWriter::Start(bool gzip, const std::string& what, std::string* error) {
  gzip_ = gzip;
  if (gzip_) {
    deflater_ = std::make_unique<Deflater>();
    // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
    if (deflateInit2(&deflater_->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      *error = what + ": zlib could not start";
      return false;
    }
    deflater_->ready = true;
  }
  buf_ = "{";
  return true;
}

void ChromeTraceWriter::BeginEvents() {
  if (events_begun_) return;
  events_begun_ = true;
  if (!keep_original_) buf_ += R"("schemaVersion": 1, "displayTimeUnit": "ns", )";
  buf_ += "\"traceEvents\": [\n";
}

void ChromeTraceWriter::KeepMember(std::string_view key, std::string_view value) {
  std::string m = "\"";
  m.append(key);
  m += "\": ";
  const size_t at = m.size();
  m.resize(at + value.size());
  size_t n = 0;
  if (simdjson::minify(value.data(), value.size(), m.data() + at, n) == simdjson::SUCCESS) {
    m.resize(at + n);
  } else {
    m.replace(at, std::string::npos, value);
  }
  if (events_begun_) {
    kept_after_ += ",\n" + m;
  } else {
    buf_ += m + ",\n";
  }
}

bool ChromeTraceWriter::WriteKept(std::string_view elements, size_t count, std::string* error) {
  if (count == 0) return true;
  BeginEvents();
  minified_.resize(elements.size());
  size_t n = 0;
  if (simdjson::minify(elements.data(), elements.size(), minified_.data(), n) != simdjson::SUCCESS) {
    *error = "trace events that are not JSON";
    return false;
  }
  if (!first_) buf_ += ",\n";
  first_ = false;
  buf_.append(minified_.data(), n);
  written_ += count;
  return buf_.size() < kFlushBytes || Flush(false, error);
}

void ChromeTraceWriter::AddProcessName(std::string pid_json, std::string name, std::string label, int64_t sort_index,
                                       uint64_t ts_ns) {
  process_names_.push_back({std::move(pid_json), std::move(name), std::move(label), sort_index, ts_ns});
}

void ChromeTraceWriter::WriteProcessNames() {
  for (const ProcessName& p : process_names_) {
    // Kineto's three: the name, the label ("GPU 0") and the sort index.
    const std::pair<const char*, std::string> rows[] = {
        {"process_name", "\"name\":"}, {"process_labels", "\"labels\":"}, {"process_sort_index", "\"sort_index\":"}};
    for (const auto& row : rows) {
      std::string m = "{\"ph\":\"M\",\"name\":\"";
      m += row.first;
      m += "\",\"pid\":" + p.pid + ",\"tid\":0,\"ts\":";
      AppendMicros(&m, p.ts);
      m += ",\"args\":{" + row.second;
      if (row.first == std::string_view("process_name")) {
        AppendJsonString(&m, p.name);
      } else if (row.first == std::string_view("process_labels")) {
        AppendJsonString(&m, p.label);
      } else {
        m += std::to_string(p.sort_index);
      }
      m += "}}";
      Emit(m);
      --written_;  // metadata, not an event.
    }
  }
}

std::string_view ChromeTraceWriter::Name(NameId id) const { return id < names_.size() ? names_[id] : ""; }

std::string ChromeTraceWriter::Track(TrackId id) const {
  const TrackInfo info = id < tracks_.size() ? tracks_[id] : TrackInfo{};
  if (info.type == TrackType::kGpuStream) {
    return "\"pid\":" + std::to_string(info.device) + ",\"tid\":\"stream " + std::to_string(info.os_id) + "\"";
  }
  return "\"pid\":1,\"tid\":" + std::to_string(info.os_id != 0 ? info.os_id : id);
}

void ChromeTraceWriter::Define(const Event& d) {
  if (d.kind == EventKind::kNameDef) {
    if (d.name >= names_.size()) names_.resize(d.name + 1);
    names_[d.name] = std::string_view(d.payload.name_def.data, d.payload.name_def.size);
  } else if (d.kind == EventKind::kTrackDef) {
    if (d.track >= tracks_.size()) tracks_.resize(d.track + 1);
    // The last definition wins (a thread's name may come late): names are
    // written at the end.
    tracks_[d.track] = TrackInfo{d.name, d.payload.track_def.type, d.payload.track_def.os_tid, d.device};
  }
}

void ChromeTraceWriter::Emit(std::string_view json) {
  BeginEvents();
  if (!first_) buf_ += ",\n";
  first_ = false;
  buf_ += json;
  ++written_;
}

void ChromeTraceWriter::WriteEvent(const Event& e) {
  std::string j = "{";
  auto head = [&](std::string_view ph, std::string_view cat, std::string_view name) {
    j += "\"ph\":\"";
    j += ph;
    j += '"';
    if (!cat.empty()) {
      j += ",\"cat\":\"";
      j += cat;
      j += '"';
    }
    j += ",\"name\":";
    AppendJsonString(&j, name);
    j += ',' + Track(e.track) + ",\"ts\":";
    AppendMicros(&j, e.ts);
    if (ph == "X") {
      j += ",\"dur\":";
      AppendMicros(&j, e.dur);
    }
  };
  auto arg = [&](std::string_view key, std::string_view value, bool first) {
    j += first ? ",\"args\":{" : ",";
    AppendJsonString(&j, key);
    j += ':';
    j += value;
  };
  const std::string_view name = Name(e.name);
  if (e.kind != EventKind::kDeviceInfo) min_ts_ = std::min(min_ts_, e.ts);
  switch (e.kind) {
    case EventKind::kFrameworkOp: {
      head("X", "cpu_op", name);
      // An op without an external id gets one, from the top of the id space,
      // so that its kernels can name it.
      const uint32_t id = e.corr != 0 ? e.corr : next_external_id_++;
      arg("External id", std::to_string(id), true);
      j += '}';
      op_external_[e.name] = id;
      break;
    }
    case EventKind::kHostSpan: head("X", "user_annotation", name); break;
    case EventKind::kRuntimeApi:
      head("X", e.sub == static_cast<uint8_t>(ApiLayer::kDriver) ? "cuda_driver" : "cuda_runtime", name);
      arg("correlation", std::to_string(e.corr), true);
      j += "}}";
      Emit(j);
      LaunchFlow(e, /*start=*/true);
      return;
    case EventKind::kStepMarker:
      head("X", "liveprof_step", name);
      arg("step_num", std::to_string(e.payload.step.step_num), true);
      j += '}';
      break;
    case EventKind::kInputSpan:
      head("X", "liveprof_input", name);
      arg("stage", std::to_string(e.sub), true);
      j += '}';
      break;
    case EventKind::kKernel: {
      head("X", "kernel", name);
      const TrackInfo t = e.track < tracks_.size() ? tracks_[e.track] : TrackInfo{};
      arg("device", std::to_string(e.device), true);
      arg("stream", std::to_string(t.os_id), false);
      arg("correlation", std::to_string(e.corr), false);
      if (const auto op = op_external_.find(e.payload.kernel.op);
          e.payload.kernel.op != 0 && op != op_external_.end()) {
        arg("External id", std::to_string(op->second), false);
      } else if (e.payload.kernel.op != 0) {
        // An op known by name only (XPlane's tf_op): liveprof's own arg.
        std::string op_name;
        AppendJsonString(&op_name, Name(e.payload.kernel.op));
        arg("framework op", op_name, false);
      }
      const std::string_view details = Name(e.payload.kernel.details);
      if (const std::string_view v = Detail(details, "regs"); !v.empty()) arg("registers per thread", v, false);
      if (const std::string_view v = Detail(details, "static_shared"); !v.empty()) arg("shared memory", v, false);
      if (const std::string_view v = Detail(details, "grid"); !v.empty())
        arg("grid", "[" + std::string(v) + "]", false);
      if (const std::string_view v = Detail(details, "block"); !v.empty())
        arg("block", "[" + std::string(v) + "]", false);
      if (const std::string_view v = Detail(details, "occ_pct"); !v.empty()) {
        arg("est. achieved occupancy %", v, false);
      }
      if (const std::string_view v = Detail(details, "blocks_per_sm"); !v.empty()) arg("blocks per SM", v, false);
      if (const std::string_view v = Detail(details, "warps_per_sm"); !v.empty()) arg("warps per SM", v, false);
      j += '}';
      break;
    }
    case EventKind::kAlloc:
    case EventKind::kFree: {
      const bool device = static_cast<MemoryKind>(e.sub) == MemoryKind::kDevice;
      head("i", "", "[memory]");
      j += ",\"s\":\"t\"";
      arg("Device Type", device ? "1" : "0", true);
      // Kineto's allocators are "CUDA:<id>" / "CPU:<id>" (the CPU's id is -1):
      // keep the id the name carries, else the device's ordinal.
      std::string id = std::to_string(e.device);
      bool kineto_name = false;
      for (const std::string_view prefix : {"CUDA:", "CPU:"}) {
        if (name.starts_with(prefix) && name.size() > prefix.size() && name.size() - prefix.size() < 12 &&
            name.substr(prefix.size()).find_first_not_of("-0123456789") == std::string_view::npos) {
          id = std::string(name.substr(prefix.size()));
          kineto_name = true;
        }
      }
      arg("Device Id", id, false);
      if (!kineto_name) {  // another allocator (XPlane's "GPU_0_bfc"): liveprof's own arg.
        std::string allocator;
        AppendJsonString(&allocator, name);
        arg("Allocator", allocator, false);
      }
      arg("Addr", std::to_string(e.payload.memory.address), false);
      const std::string bytes = std::to_string(e.payload.memory.bytes);
      arg("Bytes", e.kind == EventKind::kFree ? "-" + bytes : bytes, false);
      if (e.kind == EventKind::kAlloc && (e.flags & kFlagAllocAnnotation) != 0) {  // liveprof's own args
        const AllocAnnotation a = ParseAllocAnnotation(Name(e.corr));
        for (const auto& [key, value] :
             {std::pair{"Op", a.op}, {"Region", a.region}, {"Data Type", a.data_type}, {"Shape", a.shape}}) {
          if (value.empty()) continue;
          std::string text;
          AppendJsonString(&text, value);
          arg(key, text, false);
        }
        if (a.requested_bytes != 0) arg("Requested Bytes", std::to_string(a.requested_bytes), false);
      }
      j += '}';
      break;
    }
    case EventKind::kCounter: {
      const size_t slash = name.rfind('/');
      head("C", "", slash == std::string_view::npos ? name : name.substr(0, slash));
      j += ",\"args\":{";
      AppendJsonString(&j, slash == std::string_view::npos ? std::string_view("value") : name.substr(slash + 1));
      j += ':';
      AppendJsonDouble(&j, e.payload.counter.value);  // null when not finite.
      j += '}';
      break;
    }
    case EventKind::kInstant:
      head("i", "", name);
      j += ",\"s\":\"t\"";
      break;
    case EventKind::kFlow:
      head(e.sub == 0 ? "s" : e.sub == 1 ? "t" : "f", "flow", name);
      j += ",\"id\":" + std::to_string(e.corr);
      if (e.sub == 2) j += ",\"bp\":\"e\"";
      break;
    case EventKind::kDeviceInfo:  // written at the end, as Kineto's "deviceProperties".
      gpus_.push_back(e);
      return;
    default: {
      if (!IsDeviceKind(e.kind)) {  // no Chrome form.
        ++skipped_;
        return;
      }
      // Copies and memsets (the kernel is above).
      const bool memset = e.kind == EventKind::kMemset;
      // The importer reads a copy's direction from its name: keep a name
      // that says it, else write Kineto's.
      const std::string_view direction = CopyDirection(e.kind);
      const bool keep = !name.empty() && (direction.empty() || name.find(direction) != std::string_view::npos);
      const std::string fallback = memset ? "Memset (Device)" : "Memcpy " + std::string(direction);
      head("X", memset ? "gpu_memset" : "gpu_memcpy", keep ? name : std::string_view(fallback));
      const TrackInfo t = e.track < tracks_.size() ? tracks_[e.track] : TrackInfo{};
      arg("device", std::to_string(e.device), true);
      arg("stream", std::to_string(t.os_id), false);
      arg("correlation", std::to_string(e.corr), false);
      arg("bytes", std::to_string(e.payload.copy.bytes), false);
      j += '}';
      break;
    }
  }
  j += '}';
  Emit(j);
  if (IsDeviceKind(e.kind)) LaunchFlow(e, /*start=*/false);
}

void ChromeTraceWriter::LaunchFlow(const Event& e, bool start) {
  if (!launch_flows_ || e.corr == 0) return;
  // Kineto's: "s" at the launch call, "f" (binding to the enclosing slice)
  // at its device activity, id = the correlation id; only for a launch with
  // device activity, so written once both are seen (in either order).
  auto& mine = start ? unmatched_launches_ : unmatched_activities_;
  auto& other = start ? unmatched_activities_ : unmatched_launches_;
  const auto it = other.find(e.corr);
  if (it == other.end()) {
    if (mine.size() < kMaxUnmatchedFlows) mine.emplace(e.corr, std::make_pair(e.track, e.ts));
    return;
  }
  const std::pair<TrackId, uint64_t> here{e.track, e.ts};
  const std::pair<TrackId, uint64_t> launch = start ? here : it->second, activity = start ? it->second : here;
  other.erase(it);
  for (const bool s : {true, false}) {
    const auto& [track, ts] = s ? launch : activity;
    std::string j = s ? "{\"ph\":\"s\"," : "{\"ph\":\"f\",\"bp\":\"e\",";
    j += "\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":" + std::to_string(e.corr) + "," + Track(track) + ",\"ts\":";
    AppendMicros(&j, ts);
    j += '}';
    Emit(j);
    --written_;  // a link, not an event.
    ++flows_;
  }
}

bool ChromeTraceWriter::Write(std::span<const Event> definitions, std::span<const Event> events, std::string* error) {
  for (const Event& d : definitions) Define(d);
  for (const Event& e : events) {
    if (e.kind == EventKind::kNameDef || e.kind == EventKind::kTrackDef) {
      Define(e);
    } else {
      WriteEvent(e);
    }
    if (buf_.size() >= kFlushBytes && !Flush(false, error)) return false;
  }
  return true;
}

bool ChromeTraceWriter::Put(const void* data, size_t n, std::string* error) {
  if (sink_) {
    if (n == 0 || sink_(std::string_view(static_cast<const char*>(data), n))) return true;
    *error = "the export's reader went away";
    return false;
  }
  if (n != 0 && std::fwrite(data, 1, n, file_) != n) {
    *error = std::string("write failed: ") + std::strerror(errno);
    return false;
  }
  return true;
}

bool ChromeTraceWriter::Flush(bool finish, std::string* error) {
  if (!gzip_) {
    if (!Put(buf_.data(), buf_.size(), error)) return false;
    buf_.clear();
    return true;
  }
  z_stream& z = deflater_->z;
  z.next_in = reinterpret_cast<Bytef*>(buf_.data());
  z.avail_in = static_cast<uInt>(buf_.size());
  unsigned char out[1 << 16];
  int rc = Z_OK;
  do {
    z.next_out = out;
    z.avail_out = sizeof out;
    rc = deflate(&z, finish ? Z_FINISH : Z_NO_FLUSH);
    if (!Put(out, sizeof out - z.avail_out, error)) return false;
  } while (z.avail_out == 0 || (finish && rc != Z_STREAM_END));
  buf_.clear();
  return true;
}

bool ChromeTraceWriter::Close(std::string* error) {
  if (file_ == nullptr && !sink_) return true;
  if (!keep_original_) {
    // Each GPU's process named as Kineto names it (Perfetto shows the name;
    // without it, a bare pid).
    std::set<uint32_t> devices;
    for (const TrackInfo& t : tracks_) {
      if (t.type == TrackType::kGpuStream) devices.insert(t.device);
    }
    for (const uint32_t d : devices) {
      const std::string gpu = "GPU " + std::to_string(d);
      AddProcessName(std::to_string(d), gpu, gpu, kGpuSortIndex + d, min_ts_ == UINT64_MAX ? 0 : min_ts_);
    }
  }
  WriteProcessNames();
  // Host threads' names (metadata: where they stand does not matter).
  for (TrackId t = 1; t < tracks_.size(); ++t) {
    if (tracks_[t].type != TrackType::kHostThread || tracks_[t].name == 0) continue;
    std::string m = "{\"ph\":\"M\",\"name\":\"thread_name\"," + Track(t) + ",\"args\":{\"name\":";
    AppendJsonString(&m, Name(tracks_[t].name));
    m += "}}";
    Emit(m);
    --written_;  // metadata, not an event.
  }
  BeginEvents();
  buf_ += "\n]";
  if (!gpus_.empty()) {
    buf_ += ",\n\"deviceProperties\": [";
    for (size_t i = 0; i < gpus_.size(); ++i) {
      const Event& g = gpus_[i];
      buf_ += i ? ",\n  {" : "\n  {";
      buf_ += "\"id\": " + std::to_string(g.device) + ", \"name\": ";
      AppendJsonString(&buf_, Name(g.name));
      buf_ += ", \"totalGlobalMem\": " + std::to_string(g.payload.device_info.memory_bytes) +
              ", \"computeMajor\": " + std::to_string(g.payload.device_info.cc_major) +
              ", \"computeMinor\": " + std::to_string(g.payload.device_info.cc_minor) +
              ", \"numSms\": " + std::to_string(g.payload.device_info.sm_count) + "}";
    }
    buf_ += "\n]";
    written_ += gpus_.size();
  }
  if (!distributed_.empty()) buf_ += ",\n\"distributedInfo\": " + distributed_;
  if (base_time_ns_ != 0) buf_ += ",\n\"baseTimeNanoseconds\": " + std::to_string(base_time_ns_);
  buf_ += kept_after_;
  buf_ += "}\n";
  const bool ok = Flush(true, error);
  if (sink_ != nullptr) {
    sink_ = nullptr;
    return ok;
  }
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (ok && !closed) *error = std::string("close failed: ") + std::strerror(errno);
  if (temp_path_.empty()) return ok && closed;  // written in place (not a regular file).
  // The whole file, under its own name; else none.
  if (ok && closed && std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    *error = path_ + ": " + std::strerror(errno);
  } else if (ok && closed) {
    temp_path_.clear();
    return true;
  }
  Abort();
  return false;
}

bool ExportTraceFile(const std::string& in, const std::string& out, uint64_t* events, std::string* error) {
  ChromeTraceWriter writer;
  TraceFileImporter importer;
  std::string write_error;
  // A Chrome trace goes back as read; the importer checks it as it reads.
  const bool as_read = TraceFileImporter::IsChromeTrace(in);
  if (!as_read) writer.WriteLaunchFlows();  // (a Chrome trace has its own)
  if (as_read) {
    writer.KeepOriginal();
    importer.chrome().Keep({[&](std::string_view elements, size_t count) {
                              if (write_error.empty()) writer.WriteKept(elements, count, &write_error);
                            },
                            [&](std::string_view key, std::string_view value) { writer.KeepMember(key, value); }});
  }
  if (!writer.Open(out, error)) return false;  // the message names the file.
  // Batch by batch, in file order: the importer links a kernel to an op only
  // when the op came first, so the op is written before the kernel too.
  ImportReport report;
  uint64_t first_ts = UINT64_MAX;  // (as read: for the process names added)
  const bool read = importer.ImportFile(
      in,
      [&](std::span<const Event> defs, std::span<const Event> batch) {
        if (as_read) {
          for (const Event& e : batch) {
            if (e.kind != EventKind::kDeviceInfo) first_ts = std::min(first_ts, e.ts);
          }
        } else if (write_error.empty()) {
          writer.Write(defs, batch, &write_error);
        }
      },
      &report, error);
  if (!read) return false;  // the message names the input; the writer removes its file.
  if (as_read) {
    for (const std::string& pid : importer.chrome().UnnamedGpuProcesses()) {
      int64_t n = 0;
      const auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), n);
      const bool number = ec == std::errc() && end == pid.data() + pid.size();
      std::string pid_json;
      if (number) {
        pid_json = pid;
      } else {
        AppendJsonString(&pid_json, pid);
      }
      writer.AddProcessName(pid_json, "GPU " + pid, "GPU " + pid, kGpuSortIndex + (number ? n : 0),
                            first_ts == UINT64_MAX ? 0 : first_ts);
    }
  } else {
    // The events were written as read, relative to the base time if any.
    if (report.has_base_time) writer.SetBaseTime(report.base_time_ns);
    writer.SetDistributedInfo(report.distributed);
  }
  if (!write_error.empty() || !writer.Close(&write_error)) {
    *error = out + ": " + write_error;
    return false;
  }
  *events = writer.events_written();
  return true;
}

bool ExportStoreRangeTo(const TraceStore& store, uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                        const std::function<bool(std::string_view)>& sink, uint64_t max_events, std::string* error) {
  ChromeTraceWriter writer;
  writer.WriteLaunchFlows();  // Perfetto's launch → kernel arrows.
  if (!writer.OpenSink(sink, /*gzip=*/true, error)) return false;
  // Definitions first: every name and track the store knows.
  const std::vector<std::string> names = store.Names();
  std::vector<Event> defs;
  for (NameId n = 0; n < names.size(); ++n) defs.push_back(NameDefEvent(n, names[n]));
  for (const auto& [id, info] : store.Tracks()) defs.push_back(TrackDefEvent(id, info));
  std::string write_error;
  writer.Write(defs, {}, &write_error);
  std::vector<Event> batch;
  auto flush = [&] {
    if (write_error.empty()) writer.Write({}, batch, &write_error);
    batch.clear();
  };
  uint64_t events = 0;
  // A write that failed (a reader gone) stops the walk at once.
  store.ForEachWhile(t0, t1, tracks, [&](StoredEventId, const Event& e) {
    if (++events > max_events) return true;  // counted, for the message.
    batch.push_back(e);
    if (batch.size() == 4096) flush();
    return write_error.empty();
  });
  if (events > max_events && write_error.empty()) {
    write_error = "the range holds " + std::to_string(events) + " events, over the " + std::to_string(max_events) +
                  " one export takes: narrow t0 / t1 or tracks";
  }
  flush();
  const bool ok = write_error.empty() && writer.Close(&write_error) && write_error.empty();
  if (!ok) *error = write_error;
  return ok;
}

bool ExportStoreRange(const TraceStore& store, uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                      std::string* gz, std::string* error) {
  gz->clear();
  return ExportStoreRangeTo(
      store, t0, t1, tracks,
      [gz](std::string_view piece) {
        gz->append(piece);
        return true;
      },
      kMaxExportEvents, error);
}

bool ExportStoreRangeStream(const TraceStore& store, uint64_t t0, uint64_t t1, const std::vector<TrackId>& tracks,
                            const std::function<bool(std::string_view)>& sink, std::string* error) {
  return ExportStoreRangeTo(store, t0, t1, tracks, sink, UINT64_MAX, error);
}

}  // namespace liveprof
