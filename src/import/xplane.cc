#include "import/xplane.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/wire_format_lite.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <optional>
#include <unordered_map>

#include "aggregators/tf/tf_op_name.h"
#include "stream/alloc_annotation.h"
#include "xplane.pb.h"

namespace liveprof {
namespace {

namespace pb = google::protobuf;
using xplane::XEvent;
using xplane::XLine;
using xplane::XPlane;
using xplane::XStat;

// The stats the importer reads (xplane_schema.cc's names).
enum class Stat : uint8_t {
  kOther,
  kCorrelationId,
  kKernelDetails,
  kMemcpyDetails,
  kTfOp,
  kLevel0,
  kGroupId,
  kStepName,
  kStepNum,
  kIterNum,
  kRoot,
  kAllocatorName,
  kAddr,
  kAllocationBytes,
  kRequestedBytes,
  kName,
  kRegionType,
  kDataType,
  kTensorShape,
  // device plane stats
  kCcMajor,
  kCcMinor,
  kCoreCount,
  kMemorySize,
  kVendor,
};
Stat StatOf(std::string_view name) {
  static const std::unordered_map<std::string_view, Stat> kStats = {
      {"correlation_id", Stat::kCorrelationId},
      {"kernel_details", Stat::kKernelDetails},
      {"memcpy_details", Stat::kMemcpyDetails},
      {"tf_op", Stat::kTfOp},
      {"level 0", Stat::kLevel0},
      {"group_id", Stat::kGroupId},
      {"step_name", Stat::kStepName},
      {"step_num", Stat::kStepNum},
      {"iter_num", Stat::kIterNum},
      {"_r", Stat::kRoot},
      {"allocator_name", Stat::kAllocatorName},
      {"addr", Stat::kAddr},
      {"allocation_bytes", Stat::kAllocationBytes},
      {"requested_bytes", Stat::kRequestedBytes},
      {"compute_cap_major", Stat::kCcMajor},
      {"compute_cap_minor", Stat::kCcMinor},
      {"core_count", Stat::kCoreCount},
      {"memory_size", Stat::kMemorySize},
      {"device_vendor", Stat::kVendor},
      {"name", Stat::kName},
      {"region_type", Stat::kRegionType},
      {"data_type", Stat::kDataType},
      {"tensor_shape", Stat::kTensorShape},
  };
  const auto it = kStats.find(name);
  return it == kStats.end() ? Stat::kOther : it->second;
}

// The lines xprof derives on device planes from the others: not activity.
bool IsDerivedLine(const XLine& line) {
  static const std::string_view kDerived[] = {
      "Steps",
      "XLA Modules",
      "XLA Ops",
      "Async XLA Ops",
      "TensorFlow Ops",
      "Framework Ops",
      "TensorFlow Name Scope",
      "Framework Name Scope",
      "Source code",
      "Launch Stats",
      "XLA TraceMe",
  };
  for (const std::string_view d : kDerived) {
    if (line.name() == d) return true;
  }
  // Derived line ids start at 0xdeadbeef (older writers: as a signed 32-bit value).
  return static_cast<uint32_t>(line.id()) >= 0xdeadbeefu && !line.name().starts_with("Stream");
}

// "/device:GPU:3" -> 3.
std::optional<uint8_t> GpuOrdinal(std::string_view plane) {
  constexpr std::string_view kPrefix = "/device:GPU:";
  if (!plane.starts_with(kPrefix)) return std::nullopt;
  unsigned n = 0;
  const char* end = plane.data() + plane.size();
  const auto [p, ec] = std::from_chars(plane.data() + kPrefix.size(), end, n);
  if (ec != std::errc() || p != end || n > 255) return std::nullopt;
  return static_cast<uint8_t>(n);
}

// "size:6144 dest:4 async:1" -> 6144.
uint64_t CopyBytes(std::string_view details) {
  const size_t at = details.find("size:");
  uint64_t n = 0;
  if (at != std::string_view::npos) {
    std::from_chars(details.data() + at + 5, details.data() + details.size(), n);
  }
  return n;
}

// A TraceMe name may carry its args: "name#k=v,...#" (traceme_encode.h).
// TensorFlow's DataType (types.proto) as xprof's memory profile names it
// (DataTypeString: "float", "int32", "bfloat16", ..., "INVALID" for 0).
std::string_view TfDataTypeName(uint64_t type) {
  static constexpr std::string_view kNames[] = {
      "INVALID",   "float",  "double",     "int32", "uint8",    "int16",   "int8",     "string",
      "complex64", "int64",  "bool",       "qint8", "quint8",   "qint32",  "bfloat16", "qint16",
      "quint16",   "uint16", "complex128", "half",  "resource", "variant", "uint32",   "uint64",
  };
  return type < std::size(kNames) ? kNames[type] : "unknown";
}

std::string_view WithoutArgs(std::string_view name) {
  const size_t hash = name.find('#');
  return hash == std::string_view::npos ? name : name.substr(0, hash);
}

// What one event carries, from its metadata's stats and then its own.
struct Stats {
  std::optional<uint64_t> correlation, group_id, step_num, addr, allocation_bytes, requested_bytes, data_type;
  std::string_view kernel_details, memcpy_details, tf_op, level0, step_name, allocator, name, region, shape;
  bool root = false;
};

// One plane's stat metadata: which of the ids name a stat we read.
class PlaneStats {
 public:
  explicit PlaneStats(const XPlane& plane) : plane_(plane) {
    for (const auto& [id, meta] : plane.stat_metadata()) {
      if (const Stat s = StatOf(meta.name()); s != Stat::kOther) known_.emplace(id, s);
    }
  }
  Stat Of(const XStat& s) const {
    const auto it = known_.find(s.metadata_id());
    return it == known_.end() ? Stat::kOther : it->second;
  }
  std::string_view Text(const XStat& s) const {
    if (s.value_case() == XStat::kStrValue) return s.str_value();
    if (s.value_case() == XStat::kRefValue) {  // the name of another stat metadata.
      const auto it = plane_.stat_metadata().find(static_cast<int64_t>(s.ref_value()));
      return it == plane_.stat_metadata().end() ? std::string_view() : std::string_view(it->second.name());
    }
    return {};
  }
  static std::optional<uint64_t> Number(const XStat& s) {
    switch (s.value_case()) {
      case XStat::kUint64Value: return s.uint64_value();
      case XStat::kInt64Value: return static_cast<uint64_t>(s.int64_value());
      case XStat::kDoubleValue: {  // in range, or nothing (NaN fails both tests).
        const double d = s.double_value();
        return d >= 0 && d < 1.8e19 ? std::optional<uint64_t>(static_cast<uint64_t>(d)) : std::nullopt;
      }
      case XStat::kStrValue: {
        uint64_t n = 0;
        const std::string& t = s.str_value();
        const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
        return ec == std::errc() && p == t.data() + t.size() ? std::optional<uint64_t>(n) : std::nullopt;
      }
      default: return std::nullopt;
    }
  }
  void Read(const pb::RepeatedPtrField<XStat>& stats, Stats* out) const {
    for (const XStat& s : stats) {
      switch (Of(s)) {
        case Stat::kCorrelationId: out->correlation = Number(s); break;
        case Stat::kGroupId: out->group_id = Number(s); break;
        case Stat::kStepNum:
        case Stat::kIterNum: out->step_num = Number(s); break;
        case Stat::kAddr: out->addr = Number(s); break;
        case Stat::kAllocationBytes: out->allocation_bytes = Number(s); break;
        case Stat::kRequestedBytes: out->requested_bytes = Number(s); break;
        case Stat::kKernelDetails: out->kernel_details = Text(s); break;
        case Stat::kMemcpyDetails: out->memcpy_details = Text(s); break;
        case Stat::kTfOp: out->tf_op = Text(s); break;
        case Stat::kLevel0: out->level0 = Text(s); break;
        case Stat::kStepName: out->step_name = Text(s); break;
        case Stat::kAllocatorName: out->allocator = Text(s); break;
        case Stat::kName: out->name = Text(s); break;
        case Stat::kRegionType: out->region = Text(s); break;
        case Stat::kDataType: out->data_type = Number(s); break;
        case Stat::kTensorShape: out->shape = Text(s); break;
        case Stat::kRoot: out->root = true; break;
        default: break;
      }
    }
  }

 private:
  const XPlane& plane_;
  std::unordered_map<int64_t, Stat> known_;
};

class Converter {
 public:
  Converter(NameTable* names, ImportReport* report) : names_(names), report_(report) {}

  void Plane(const XPlane& plane) {
    ++planes_;
    uint64_t n = 0;
    for (const XLine& line : plane.lines()) n += static_cast<uint64_t>(line.events_size());
    report_->trace_events += n;
    const std::string_view name = plane.name();
    if (const auto gpu = GpuOrdinal(name)) return DevicePlane(plane, *gpu);
    if (name.starts_with("/host:") && name != "/host:metadata") return HostPlane(plane);
    if (n > 0) AddCount(report_->dropped, "events of plane " + std::string(name) + " (not analysed)", n);
  }

  // The host's step roots, when no device had a Steps line.
  void Finish() {
    if (!steps_from_device_) {
      for (const Event& e : host_roots_) Emit(e);
    } else if (!host_roots_.empty()) {
      AddCount(report_->caveats, "host step roots (_r) not used: the devices' Steps lines were", host_roots_.size());
    }
    host_roots_.clear();
  }

  // Definitions not sent yet, then the events; both cleared.
  void Flush(const ChromeTraceImporter::Sink& sink) {
    for (const uint32_t n = names_->size(); names_sent_ < n; ++names_sent_) {
      defs_.push_back(NameDefEvent(names_sent_, names_->Get(names_sent_)));
    }
    for (; tracks_sent_ < tracks_.size(); ++tracks_sent_) {
      defs_.push_back(TrackDefEvent(static_cast<TrackId>(tracks_sent_), tracks_[tracks_sent_]));
    }
    if (!defs_.empty() || !events_.empty()) sink(defs_, events_);
    defs_.clear();
    events_.clear();
  }

  uint64_t planes() const { return planes_; }

 private:
  // Begin and end in ns of an event of `line`; nullopt when it has no
  // offset, is before 0 or overflows (a corrupt file).
  static std::optional<std::pair<uint64_t, uint64_t>> Times(const XLine& line, const XEvent& e) {
    int64_t end_ps = 0, begin = 0, end = 0;
    if (e.data_case() != XEvent::kOffsetPs ||
        __builtin_add_overflow(e.offset_ps(), std::max<int64_t>(0, e.duration_ps()), &end_ps) ||
        __builtin_add_overflow(line.timestamp_ns(), e.offset_ps() / 1000, &begin) ||
        __builtin_add_overflow(line.timestamp_ns(), end_ps / 1000, &end) || begin < 0) {
      return std::nullopt;
    }
    return std::pair<uint64_t, uint64_t>(static_cast<uint64_t>(begin), static_cast<uint64_t>(end));
  }

  TrackId Track(TrackType type, uint8_t device, int64_t line_id, std::string_view name) {
    const auto key = std::make_tuple(static_cast<uint8_t>(type), device, line_id);
    if (const auto it = track_of_.find(key); it != track_of_.end()) return it->second;
    const auto id = static_cast<TrackId>(tracks_.size());
    tracks_.push_back(TrackInfo{names_->Intern(name), type, static_cast<uint64_t>(line_id), device});
    track_of_.emplace(key, id);
    return id;
  }

  // An XEvent's time, name (its metadata's, interned once per plane) and
  // stats (its metadata's, then its own) on `track`; false, counted, when
  // it has no time.
  bool Read(const XPlane& plane, const PlaneStats& stats, const XLine& line, const XEvent& x, TrackId track, Event* e,
            Stats* s) {
    const auto times = Times(line, x);
    if (!times) {
      AddCount(report_->dropped, "events without a usable time (aggregated, before 0 or out of range)");
      return false;
    }
    e->ts = times->first;
    e->dur = times->second - times->first;
    e->track = track;
    const auto it = plane.event_metadata().find(x.metadata_id());
    if (it != plane.event_metadata().end()) {
      auto [slot, fresh] = name_of_.try_emplace(x.metadata_id(), 0);
      if (fresh) slot->second = names_->Intern(WithoutArgs(it->second.name()));
      e->name = slot->second;
      stats.Read(it->second.stats(), s);
    }
    stats.Read(x.stats(), s);
    return true;
  }

  void HostPlane(const XPlane& plane) {
    const PlaneStats stats(plane);
    name_of_.clear();
    for (const XLine& line : plane.lines()) {
      const std::string& line_name = line.display_name().empty() ? line.name() : line.display_name();
      const TrackId track = Track(TrackType::kHostThread, 0, line.id(), line_name);
      for (const XEvent& x : line.events()) {
        Event e;
        Stats s;
        if (!Read(plane, stats, line, x, track, &e, &s)) continue;
        const std::string_view name = names_->Get(e.name);
        if (s.root && s.step_num) {
          e.kind = EventKind::kStepMarker;
          e.payload.step.step_num = static_cast<int64_t>(*s.step_num);
          host_roots_.push_back(e);
          continue;
        }
        if (name == "MemoryAllocation" || name == "MemoryDeallocation") {
          Memory(e, s, name == "MemoryAllocation");
          continue;
        }
        if (s.correlation) {
          e.kind = EventKind::kRuntimeApi;
          e.corr = static_cast<uint32_t>(*s.correlation);
        } else if (name.starts_with("Iterator::")) {
          e.kind = EventKind::kInputSpan;
        } else {
          const OpCategory c = ParseTfOpName(name).category;
          e.kind =
              c == OpCategory::kTensorFlow || c == OpCategory::kJax ? EventKind::kFrameworkOp : EventKind::kHostSpan;
        }
        Emit(e);
      }
    }
  }

  // TF's allocator TraceMes: an allocator name ("GPU_0_bfc", "cpu"), the
  // address, the block's bytes; an allocation's annotation (op, region, data
  // type, shape, requested size) in `corr` (alloc_annotation.h,
  // kFlagAllocAnnotation). A free's
  // is its allocation's: xprof copies it from there too (docs/semantics-tf.md §8.3).
  void Memory(Event& e, const Stats& s, bool alloc) {
    const std::optional<uint64_t> bytes = s.allocation_bytes ? s.allocation_bytes : s.requested_bytes;
    if (!bytes || s.allocator.empty())
      return AddCount(report_->dropped, "memory events without allocator_name or bytes");
    uint8_t device = 0;
    // "GPU_0_bfc" (or "gpu_0_bfc") is device 0's; "gpu_host_bfc" is the
    // host's pinned memory that TF keeps for copies.
    const bool gpu = (s.allocator.starts_with("GPU_") || s.allocator.starts_with("gpu_")) && s.allocator.size() > 4 &&
                     s.allocator[4] >= '0' && s.allocator[4] <= '9';
    const bool pinned = !gpu && s.allocator == "gpu_host_bfc";
    if (gpu) {
      unsigned d = 0;
      std::from_chars(s.allocator.data() + 4, s.allocator.data() + s.allocator.size(), d);
      device = static_cast<uint8_t>(d);
    }
    e.kind = alloc ? EventKind::kAlloc : EventKind::kFree;
    e.name = names_->Intern(s.allocator);
    e.sub = static_cast<uint8_t>(gpu ? MemoryKind::kDevice : pinned ? MemoryKind::kPinned : MemoryKind::kHost);
    e.device = device;
    e.dur = 0;
    e.payload.memory.address = s.addr.value_or(0);
    e.payload.memory.bytes = *bytes;
    e.corr = 0;
    if (alloc) {
      const std::string note = FormatAllocAnnotation({.op = s.tf_op,
                                                      .region = s.region,
                                                      .data_type = s.data_type ? TfDataTypeName(*s.data_type) : "",
                                                      .shape = s.shape,
                                                      .requested_bytes = s.requested_bytes.value_or(0)});
      if (!note.empty()) {
        e.corr = names_->Intern(note);
        e.flags |= kFlagAllocAnnotation;
      }
    }
    if (!s.addr) AddCount(report_->caveats, "memory events without addr (address 0)");
    Emit(e);
  }

  void DevicePlane(const XPlane& plane, uint8_t device) {
    const PlaneStats stats(plane);
    name_of_.clear();
    DeviceInfo(plane, stats, device);
    bool had_steps = false;
    for (const XLine& line : plane.lines()) {
      if (line.name() == "Steps") {
        had_steps = true;
        if (steps_from_device_ && steps_device_ != device) {
          AddCount(report_->caveats, "Steps lines of more devices (the same steps, not repeated)");
          continue;
        }
        Steps(plane, stats, line);
        continue;
      }
      if (IsDerivedLine(line)) {
        if (line.events_size() > 0) {
          AddCount(report_->dropped, "events of derived line " + line.name() + " (the other lines hold them)",
                   static_cast<uint64_t>(line.events_size()));
        }
        continue;
      }
      const TrackId track =
          Track(TrackType::kGpuStream, device, line.id(), "GPU " + std::to_string(device) + " " + line.name());
      for (const XEvent& x : line.events()) Device(plane, stats, line, x, track, device);
    }
    if (had_steps && !steps_from_device_) {
      steps_from_device_ = true;
      steps_device_ = device;
    }
  }

  void Device(const XPlane& plane, const PlaneStats& stats, const XLine& line, const XEvent& x, TrackId track,
              uint8_t device) {
    Event e;
    Stats s;
    if (!Read(plane, stats, line, x, track, &e, &s)) return;
    e.device = device;
    e.corr = static_cast<uint32_t>(s.correlation.value_or(0));
    const std::string_view name = names_->Get(e.name);
    if (!s.memcpy_details.empty() || StartsWithNoCase(name, "memcpy")) {
      e.kind = CopyKindFromName(name);
      e.payload.copy.bytes = CopyBytes(s.memcpy_details);
    } else if (StartsWithNoCase(name, "memset")) {
      e.kind = EventKind::kMemset;
    } else {
      e.kind = EventKind::kKernel;
      if (!s.kernel_details.empty()) e.payload.kernel.details = names_->Intern(s.kernel_details);
      // JAX on GPU writes a placeholder tf_op ("XlaModule:") and the op's
      // path in `name` ("jit(f)/conv_general_dilated").
      std::string_view op = WithoutArgs(!s.tf_op.empty() ? s.tf_op : s.level0);
      if ((op.empty() || op.ends_with(':')) && !s.name.empty()) op = s.name;
      if (!op.empty()) e.payload.kernel.op = names_->Intern(op);
    }
    Emit(e);
  }

  // xprof's Steps line: one event per step, on a host track of its own.
  void Steps(const XPlane& plane, const PlaneStats& stats, const XLine& line) {
    const TrackId track = Track(TrackType::kHostThread, 0, line.id(), "Steps");
    for (const XEvent& x : line.events()) {
      Event e;
      Stats s;
      if (!Read(plane, stats, line, x, track, &e, &s)) continue;
      e.kind = EventKind::kStepMarker;
      int64_t step = static_cast<int64_t>(s.group_id.value_or(0));
      std::from_chars(s.step_name.data(), s.step_name.data() + s.step_name.size(), step);
      e.payload.step.step_num = step;
      Emit(e);
    }
  }

  // The plane's own stats: compute capability, SMs, memory.
  void DeviceInfo(const XPlane& plane, const PlaneStats& stats, uint8_t device) {
    Event e;
    e.kind = EventKind::kDeviceInfo;
    e.device = device;
    bool any = false;
    std::string_view vendor;
    for (const XStat& s : plane.stats()) {
      if (stats.Of(s) == Stat::kVendor) vendor = stats.Text(s);
      const std::optional<uint64_t> n = PlaneStats::Number(s);
      if (!n) continue;
      switch (stats.Of(s)) {
        case Stat::kCcMajor: e.payload.device_info.cc_major = static_cast<uint8_t>(*n), any = true; break;
        case Stat::kCcMinor: e.payload.device_info.cc_minor = static_cast<uint8_t>(*n), any = true; break;
        case Stat::kCoreCount: e.payload.device_info.sm_count = static_cast<uint32_t>(*n), any = true; break;
        case Stat::kMemorySize: e.payload.device_info.memory_bytes = *n, any = true; break;
        default: break;
      }
    }
    if (!any) return;
    e.name = names_->Intern(vendor.empty() ? plane.name() : std::string(vendor) + " GPU");
    Emit(e);
  }

  void Emit(const Event& e) {
    events_.push_back(e);
    ++report_->events_out;
  }

  NameTable* names_;
  ImportReport* report_;
  std::vector<TrackInfo> tracks_{TrackInfo{}};  // id 0: no track.
  std::map<std::tuple<uint8_t, uint8_t, int64_t>, TrackId> track_of_;
  std::unordered_map<int64_t, NameId> name_of_;  // this plane's event metadata id -> name.
  std::vector<Event> events_, defs_, host_roots_;
  uint32_t names_sent_ = 0;
  size_t tracks_sent_ = 1;
  bool steps_from_device_ = false;
  uint8_t steps_device_ = 0;
  uint64_t planes_ = 0;
};

}  // namespace

bool IsXPlanePath(std::string_view path) { return path.ends_with(".xplane.pb") || path.ends_with(".xplane.pb.gz"); }

namespace {

// The XSpace in `input`, named `name` in messages. `input_error` says why
// the input ended early (a read or gzip error), if it did; `on_field` is
// called after each top-level field with the bytes read so far.
bool ImportXSpace(pb::io::ZeroCopyInputStream* input, const std::string& name, NameTable* names,
                  const ChromeTraceImporter::Sink& sink, ImportReport* report, std::string* error,
                  const std::function<std::optional<std::string>()>& input_error,
                  const std::function<void(uint64_t offset)>& on_field) {
  Converter convert(names, report);
  uint64_t offset = 0;  // bytes of the XSpace read (uncompressed).
  auto fail = [&](const std::string& what) {
    convert.Flush(sink);
    *error = name + ": " + what + " at byte " + std::to_string(offset) + " (" + std::to_string(convert.planes()) +
             " planes kept)";
    return false;
  };
  using pb::internal::WireFormatLite;
  // XSpace, one top-level field at a time: a plane (1) is parsed alone, the
  // host names (4) are kept, the rest skipped. A CodedInputStream per field:
  // its 2 GB limit applies to one plane, not to the file.
  for (;;) {
    pb::io::CodedInputStream in(input);
    const uint32_t tag = in.ReadTag();
    if (tag == 0) {
      if (const auto why = input_error()) return fail(*why);
      break;
    }
    const uint32_t field = WireFormatLite::GetTagFieldNumber(tag);
    const auto wire = WireFormatLite::GetTagWireType(tag);
    if (field == 1 && wire == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(INT32_MAX)) {
        return fail("not an XSpace: a cut or impossible plane length");
      }
      const auto limit = in.PushLimit(static_cast<int>(length));
      XPlane plane;
      if (!plane.ParseFromCodedStream(&in) || in.BytesUntilLimit() != 0) {
        return fail("not an XSpace, or truncated: plane #" + std::to_string(convert.planes() + 1) + " (" +
                    std::to_string(length) + " bytes) does not parse");
      }
      in.PopLimit(limit);
      convert.Plane(plane);
      convert.Flush(sink);
    } else if (field == 4 && wire == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      std::string host;
      if (!WireFormatLite::ReadString(&in, &host)) return fail("not an XSpace: a cut host name");
      report->hosts.push_back(std::move(host));
    } else if (field == 0 || !WireFormatLite::SkipField(&in, tag)) {
      return fail("not an XSpace: field " + std::to_string(field) + " does not parse");
    }
    offset += static_cast<uint64_t>(in.CurrentPosition());
    report->bytes = offset;
    on_field(offset);
  }
  if (convert.planes() == 0) {
    *error = name + ": not an XSpace: no planes";
    return false;
  }
  convert.Finish();
  convert.Flush(sink);
  return true;
}

}  // namespace

bool ImportXPlaneFile(const std::string& path, NameTable* names, const ChromeTraceImporter::Sink& sink,
                      ImportReport* report, std::string* error, const ImportProgressFn& progress) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": " + std::strerror(errno);
    return false;
  }
  std::error_code size_error;
  const uintmax_t size = std::filesystem::file_size(path, size_error);
  pb::io::FileInputStream file(fd, 1 << 20);
  file.SetCloseOnDelete(true);
  std::optional<pb::io::GzipInputStream> gzip;
  if (path.ends_with(".gz")) gzip.emplace(&file, pb::io::GzipInputStream::GZIP);
  pb::io::ZeroCopyInputStream* input = gzip ? static_cast<pb::io::ZeroCopyInputStream*>(&*gzip) : &file;
  const auto start = std::chrono::steady_clock::now();
  return ImportXSpace(
      input, path, names, sink, report, error,
      [&]() -> std::optional<std::string> {
        if (file.GetErrno() != 0) return std::string("read error: ") + std::strerror(file.GetErrno());
        if (gzip && gzip->ZlibErrorMessage() != nullptr) return std::string("gzip: ") + gzip->ZlibErrorMessage();
        return std::nullopt;
      },
      [&](uint64_t offset) {
        if (!progress) return;
        progress({static_cast<uint64_t>(file.ByteCount()), size_error ? 0 : static_cast<uint64_t>(size), offset,
                  report->events_out, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
      });
}

bool ImportXPlaneBytes(std::string_view bytes, NameTable* names, const ChromeTraceImporter::Sink& sink,
                       ImportReport* report, std::string* error) {
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) {
    *error = "XSpace bytes: over 2 GiB in memory (import the file instead)";
    return false;
  }
  pb::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
  return ImportXSpace(
      &input, "XSpace bytes", names, sink, report, error, [] { return std::nullopt; }, [](uint64_t) {});
}

}  // namespace liveprof
