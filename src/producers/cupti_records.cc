#include "producers/cupti_records.h"

#include <cupti_activity.h>
#include <cupti_version.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "producers/cupti_names.h"

namespace liveprof {
namespace {

static_assert(CuptiRecordParser::kOpExternalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2);
static_assert(CuptiRecordParser::kCuptiApiVersion == CUPTI_API_VERSION,
              "the record structs below are CUPTI 13.0's: check each converter against the new header");
static_assert(CuptiRecordParser::kKindSlots > CUPTI_ACTIVITY_KIND_CONFIDENTIAL_COMPUTE_ROTATION);

// The records as CUPTI lays them out, read in place (never written: the
// buffer is bytes that CUPTI, or a test's memcpy, filled).
using KernelRec = CUpti_ActivityKernel10;
using MemcpyRec = CUpti_ActivityMemcpy6;
using PeerCopyRec = CUpti_ActivityMemcpyPtoP4;
using MemsetRec = CUpti_ActivityMemset4;
using MemoryRec = CUpti_ActivityMemory4;
using PoolRec = CUpti_ActivityMemoryPool3;
using ApiRec = CUpti_ActivityAPI;
using ExternalRec = CUpti_ActivityExternalCorrelation;
using MarkerRec = CUpti_ActivityMarker2;
using OverheadRec = CUpti_ActivityOverhead3;

template <typename T>
const T& As(const uint8_t* p) {
  return *reinterpret_cast<const T*>(p);
}

// An enum-typed field's value as bytes, never as the enum: a record may hold
// a value the enum does not list (a newer CUPTI, a corrupt recording), and
// loading that as the enum type is undefined.
inline uint32_t RawAt(const void* record, size_t offset, size_t size) {
  uint32_t v = 0;
  std::memcpy(&v, static_cast<const uint8_t*>(record) + offset, size < sizeof v ? size : sizeof v);
  return v;
}
#define LIVEPROF_RAW(r, field) RawAt(&(r), offsetof(std::remove_cvref_t<decltype(r)>, field), sizeof((r).field))

// Size of a record of `kind` that we read but turn into no event; 0 if this
// build does not know the kind.
size_t IgnoredRecordSize(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_DEVICE: return sizeof(CUpti_ActivityDevice5);
    case CUPTI_ACTIVITY_KIND_CONTEXT: return sizeof(CUpti_ActivityContext3);
    case CUPTI_ACTIVITY_KIND_NAME: return sizeof(CUpti_ActivityName);
    case CUPTI_ACTIVITY_KIND_MARKER_DATA: return sizeof(CUpti_ActivityMarkerData2);
    case CUPTI_ACTIVITY_KIND_CDP_KERNEL: return sizeof(CUpti_ActivityCdpKernel);
    case CUPTI_ACTIVITY_KIND_PREEMPTION: return sizeof(CUpti_ActivityPreemption);
    case CUPTI_ACTIVITY_KIND_ENVIRONMENT: return sizeof(CUpti_ActivityEnvironment);
    case CUPTI_ACTIVITY_KIND_FUNCTION: return sizeof(CUpti_ActivityFunction);
    case CUPTI_ACTIVITY_KIND_MODULE: return sizeof(CUpti_ActivityModule);
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: return sizeof(CUpti_ActivityCudaEvent2);
    case CUPTI_ACTIVITY_KIND_STREAM: return sizeof(CUpti_ActivityStream);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_NVLINK: return sizeof(CUpti_ActivityNvLink4);
    case CUPTI_ACTIVITY_KIND_MEMORY: return sizeof(CUpti_ActivityMemory);
    case CUPTI_ACTIVITY_KIND_PCIE: return sizeof(CUpti_ActivityPcie);
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: return sizeof(CUpti_ActivityGraphTrace2);
    case CUPTI_ACTIVITY_KIND_JIT: return sizeof(CUpti_ActivityJit2);
    case CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE: return sizeof(CUpti_ActivityDeviceGraphTrace);
    case CUPTI_ACTIVITY_KIND_MEM_DECOMPRESS: return sizeof(CUpti_ActivityMemDecompress);
    default: return 0;
  }
}

// CUpti_ActivityMemoryKind -> MemoryKind (whose values follow CUPTI's; CUDA
// arrays and static device memory are device memory).
uint32_t ToMemoryKind(uint32_t cupti_kind) {
  switch (cupti_kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return static_cast<uint32_t>(MemoryKind::kPageable);
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return static_cast<uint32_t>(MemoryKind::kPinned);
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return static_cast<uint32_t>(MemoryKind::kDevice);
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return static_cast<uint32_t>(MemoryKind::kManaged);
    default: return static_cast<uint32_t>(MemoryKind::kUnknown);
  }
}

EventKind CopyKind(uint32_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return EventKind::kMemcpyHtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return EventKind::kMemcpyDtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return EventKind::kMemcpyDtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return EventKind::kMemcpyHtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return EventKind::kMemcpyPtoP;
    default: return EventKind::kMemcpyOther;
  }
}

uint8_t DeviceOrdinal(uint32_t device) { return static_cast<uint8_t>(std::min<uint32_t>(device, 255)); }

uint32_t NonNegative(int32_t v) { return v < 0 ? 0u : static_cast<uint32_t>(v); }
uint64_t Pack(uint32_t lo, uint32_t hi) { return uint64_t{lo} | uint64_t{hi} << 32; }
uint32_t Lo(uint64_t w) { return static_cast<uint32_t>(w); }
uint32_t Hi(uint64_t w) { return static_cast<uint32_t>(w >> 32); }

// A well-mixed non-zero hash (0 marks an empty ProbeTable slot).
inline size_t Hashed(uint64_t x) {
  x ^= x >> 29;
  x *= 0x9e3779b97f4a7c15ull;
  x ^= x >> 32;
  return x != 0 ? static_cast<size_t>(x) : 1;
}

// Track keys: a thread id; kGpuTrackBit | device << 32 | stream;
// kAllocationTrackBit | device; kPoolTrackBit | device; kMarkerTrackKey.
constexpr uint64_t kGpuTrackBit = uint64_t{1} << 63;
constexpr uint64_t kAllocationTrackBit = uint64_t{1} << 62;
constexpr uint64_t kPoolTrackBit = uint64_t{1} << 60;
constexpr uint64_t kMarkerTrackKey = uint64_t{1} << 61;
// The os_id of the rows that are no thread's (a thread lookup never matches).
constexpr uint64_t kNoThreadId = UINT64_MAX;

}  // namespace

std::string CuptiRecordParser::KindName(uint32_t kind) { return CuptiKindName(kind); }

CuptiRecordParser::CuptiRecordParser(Stream& stream, Options options)
    : stream_(stream),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : &identity_clock_),
      corr_(new CorrSlot[kCorrTableSize]()),
      runtime_names_(kMaxCachedCbid, 0),
      driver_names_(kMaxCachedCbid, 0) {
  NameTable& names = stream_.names();
  kind_names_[static_cast<size_t>(EventKind::kMemcpyHtoD)] = names.Intern("MemcpyHtoD");
  kind_names_[static_cast<size_t>(EventKind::kMemcpyDtoH)] = names.Intern("MemcpyDtoH");
  kind_names_[static_cast<size_t>(EventKind::kMemcpyDtoD)] = names.Intern("MemcpyDtoD");
  kind_names_[static_cast<size_t>(EventKind::kMemcpyHtoH)] = names.Intern("MemcpyHtoH");
  kind_names_[static_cast<size_t>(EventKind::kMemcpyPtoP)] = names.Intern("MemcpyPtoP");
  kind_names_[static_cast<size_t>(EventKind::kMemcpyOther)] = names.Intern("Memcpy");
  kind_names_[static_cast<size_t>(EventKind::kMemset)] = names.Intern("Memset");
  cuda_alloc_name_ = names.Intern("cuda");
  cuda_async_alloc_name_ = names.Intern("cuda_async");
  pool_counter_name_ = names.Intern("memory/cuda_async/reserved_bytes");
  internal_launch_name_ = names.Intern("CUDA internal Launch");
  recorded_marker_name_ = names.Intern("NVTX range");
}

CuptiRecordParser::~CuptiRecordParser() = default;

bool CuptiRecordParser::Timed(uint64_t start, uint64_t end) {
  if ((start == 0 && end == 0) || end < start || end - start > kMaxEventDurationNs) [[unlikely]] {
    stream_.diagnostics().Add(Diag::cupti_no_timestamp);
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Converters. Each writes its event straight into the reserved ring slot,
// every field, with stores of the fields' own sizes (an Event built on the
// stack and copied out cost a store-forwarding stall per event).

template <>
void CuptiRecordParser::Convert(const KernelRec& r, SpscRing& out) {
  const uint64_t start = r.start;
  const uint64_t end = r.end;
  if (!Timed(start, end)) return;
  const uint32_t graph_id = r.graphId;
  const uint32_t corr = r.correlationId;
  const DetailsKey key{{Pack(r.registersPerThread, NonNegative(r.staticSharedMemory)),
                        Pack(NonNegative(r.dynamicSharedMemory), NonNegative(r.gridX)),
                        Pack(NonNegative(r.gridY), NonNegative(r.gridZ)),
                        Pack(NonNegative(r.blockX), NonNegative(r.blockY)), NonNegative(r.blockZ)}};
  const NameId name = KernelName(r.name);
  const TrackId track = StreamTrack(r.deviceId, r.streamId);
  const NameId details = Details(key);
  Event* e = Reserve(out);
  if (e == nullptr) return;
  e->ts = ToHost(start);
  e->dur = EndToHost(start, end, e->ts);
  e->name = name;
  e->track = track;
  e->corr = corr;
  e->kind = EventKind::kKernel;
  e->sub = 0;
  e->flags = graph_id != 0 ? kFlagGraph : kFlagNone;
  e->device = DeviceOrdinal(r.deviceId);
  e->payload.kernel.details = details;
  e->payload.kernel.context = r.contextId;
  e->payload.kernel.graph_id = graph_id;
  e->payload.kernel.op = Op(corr);
  Publish(out, *e);
}

void CuptiRecordParser::CopyEvent(EventKind kind, uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                                  uint32_t corr, uint32_t graph_id, uint64_t bytes, uint32_t src_kind,
                                  uint32_t dst_kind, SpscRing& out) {
  if (!Timed(start, end)) return;
  const TrackId track = StreamTrack(device, stream);
  Event* e = Reserve(out);
  if (e == nullptr) return;
  e->ts = ToHost(start);
  e->dur = EndToHost(start, end, e->ts);
  e->name = kind_names_[static_cast<size_t>(kind)];
  e->track = track;
  e->corr = corr;
  e->kind = kind;
  e->sub = 0;
  e->flags = graph_id != 0 ? kFlagGraph : kFlagNone;
  e->device = DeviceOrdinal(device);
  e->payload.copy.bytes = bytes;
  e->payload.copy.src_kind = src_kind;
  e->payload.copy.dst_kind = dst_kind;
  Publish(out, *e);
}

template <>
void CuptiRecordParser::Convert(const MemcpyRec& r, SpscRing& out) {
  CopyEvent(CopyKind(r.copyKind), r.start, r.end, r.deviceId, r.streamId, r.correlationId, r.graphId, r.bytes,
            ToMemoryKind(r.srcKind), ToMemoryKind(r.dstKind), out);
}

template <>
void CuptiRecordParser::Convert(const PeerCopyRec& r, SpscRing& out) {
  CopyEvent(EventKind::kMemcpyPtoP, r.start, r.end, r.deviceId, r.streamId, r.correlationId, r.graphId, r.bytes,
            ToMemoryKind(r.srcKind), ToMemoryKind(r.dstKind), out);
}

template <>
void CuptiRecordParser::Convert(const MemsetRec& r, SpscRing& out) {
  CopyEvent(EventKind::kMemset, r.start, r.end, r.deviceId, r.streamId, r.correlationId, r.graphId, r.bytes, 0,
            ToMemoryKind(LIVEPROF_RAW(r, memoryKind)), out);
}

template <>
void CuptiRecordParser::Convert(const MemoryRec& r, SpscRing& out) {
  EventKind kind;
  switch (LIVEPROF_RAW(r, memoryOperationType)) {
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION: kind = EventKind::kAlloc; break;
    case CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE: kind = EventKind::kFree; break;
    default: ++stats_.ignored; return;
  }
  const uint64_t timestamp = r.timestamp;
  if (timestamp == 0) {
    stream_.diagnostics().Add(Diag::cupti_no_timestamp);
    return;
  }
  const bool async = r.isAsync != 0;
  const uint32_t stream = r.streamId;
  const TrackId track =
      async && stream != CUPTI_INVALID_STREAM_ID ? StreamTrack(r.deviceId, stream) : AllocationTrack(r.deviceId);
  Event* e = Reserve(out);
  if (e == nullptr) return;
  e->ts = ToHost(timestamp);
  e->dur = 0;
  e->name = async ? cuda_async_alloc_name_ : cuda_alloc_name_;
  e->track = track;
  e->corr = r.correlationId;
  e->kind = kind;
  e->sub = static_cast<uint8_t>(ToMemoryKind(LIVEPROF_RAW(r, memoryKind)));
  e->flags = kFlagNone;
  e->device = DeviceOrdinal(r.deviceId);
  e->payload.memory.address = r.address;
  e->payload.memory.bytes = r.bytes;
  Publish(out, *e);
}

template <>
void CuptiRecordParser::Convert(const PoolRec& r, SpscRing& out) {
  if (LIVEPROF_RAW(r, memoryPoolType) != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL) {
    ++stats_.ignored;
    return;
  }
  const uint64_t timestamp = r.timestamp;
  if (timestamp == 0) {
    stream_.diagnostics().Add(Diag::cupti_no_timestamp);
    return;
  }
  const bool destroyed =
      LIVEPROF_RAW(r, memoryPoolOperationType) == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
  const TrackId track = PoolTrack(r.deviceId);
  Event* e = Reserve(out);
  if (e == nullptr) return;
  e->ts = ToHost(timestamp);
  e->dur = 0;
  e->name = pool_counter_name_;
  e->track = track;
  e->corr = r.correlationId;
  e->kind = EventKind::kCounter;
  e->sub = 0;
  e->flags = kFlagNone;
  e->device = DeviceOrdinal(r.deviceId);
  e->payload.counter.value = destroyed ? 0.0 : static_cast<double>(r.size);
  e->payload.counter.reserved = 0;
  Publish(out, *e);
}

template <>
void CuptiRecordParser::Convert(const ApiRec& r, SpscRing& out) {
  const uint64_t start = r.start;
  const uint64_t end = r.end;
  if (!Timed(start, end)) return;
  const uint32_t kind = LIVEPROF_RAW(r, kind);
  const NameId name = kind == CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API
                          ? internal_launch_name_
                          : ApiName(kind == CUPTI_ACTIVITY_KIND_DRIVER, r.cbid);
  const TrackId track = ThreadTrack(r.threadId);
  Event* e = Reserve(out);
  if (e == nullptr) return;
  e->ts = ToHost(start);
  e->dur = EndToHost(start, end, e->ts);
  e->name = name;
  e->track = track;
  e->corr = r.correlationId;
  e->kind = EventKind::kRuntimeApi;
  e->sub = static_cast<uint8_t>(kind == CUPTI_ACTIVITY_KIND_DRIVER ? ApiLayer::kDriver : ApiLayer::kRuntime);
  e->flags = kFlagNone;
  e->device = 0;
  e->payload.raw[0] = 0;
  e->payload.raw[1] = 0;
  Publish(out, *e);
}

template <>
void CuptiRecordParser::Convert(const ExternalRec& r, SpscRing&) {
  const uint64_t external = r.externalId;
  if (options_.op_external_kind == 0 || LIVEPROF_RAW(r, externalKind) != options_.op_external_kind ||
      external > UINT32_MAX) {
    ++stats_.ignored;
    return;
  }
  const uint32_t corr = r.correlationId;
  const NameId op = options_.op_name ? options_.op_name(external) : static_cast<NameId>(external);
  corr_[corr & (kCorrTableSize - 1)] = CorrSlot{corr, op};
}

// A host-side event that is not a CUPTI hot path (markers, overheads).
void CuptiRecordParser::HostEvent(EventKind kind, uint64_t ts, uint64_t dur, NameId name, TrackId track, uint32_t corr,
                                  SpscRing& out) {
  Event* e = Reserve(out);
  if (e == nullptr) return;
  *e = Event{};
  e->ts = ts;
  e->dur = dur;
  e->name = name;
  e->track = track;
  e->corr = corr;
  e->kind = kind;
  Publish(out, *e);
}

template <>
void CuptiRecordParser::Convert(const MarkerRec& r, SpscRing& out) {
  Diagnostics& diag = stream_.diagnostics();
  const uint64_t timestamp = r.timestamp;
  if (timestamp == 0) {
    diag.Add(Diag::cupti_no_timestamp);
    return;
  }
  const uint32_t flags = LIVEPROF_RAW(r, flags);
  const uint32_t id = r.id;
  const TrackId track = LIVEPROF_RAW(r, objectKind) == CUPTI_ACTIVITY_OBJECT_THREAD
                            ? ThreadTrack(r.objectId.pt.threadId)
                            : ProcessMarkerTrack();
  const uint64_t host = ToHost(timestamp);
  if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0) {
    if (open_markers_.size() >= kMaxOpenMarkers) {
      diag.Add(Diag::cupti_unmatched_marker);
      return;
    }
    const char* name = r.name;
    const NameId name_id = options_.recorded ? recorded_marker_name_
                           : name != nullptr ? stream_.names().Intern(name)
                                             : 0;
    open_markers_[id] = OpenMarker{host, name_id, track};
  } else if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) {
    auto it = open_markers_.find(id);
    if (it == open_markers_.end()) {
      diag.Add(Diag::cupti_unmatched_marker);
      return;
    }
    const OpenMarker m = it->second;
    open_markers_.erase(it);
    if (host < m.ts) {
      diag.Add(Diag::cupti_no_timestamp);
      return;
    }
    HostEvent(EventKind::kHostSpan, m.ts, host - m.ts, m.name, m.track, 0, out);
  } else if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) != 0) {
    const char* name = r.name;
    const NameId name_id = options_.recorded ? recorded_marker_name_
                           : name != nullptr ? stream_.names().Intern(name)
                                             : 0;
    HostEvent(EventKind::kInstant, host, 0, name_id, track, 0, out);
  } else {
    ++stats_.ignored;  // sync-object markers (acquire / release).
  }
}

template <>
void CuptiRecordParser::Convert(const OverheadRec& r, SpscRing& out) {
  if (options_.owns_overhead_data && r.overheadData != nullptr) std::free(r.overheadData);
  const uint32_t what = LIVEPROF_RAW(r, overheadKind);
  if (IsCuptiOwnOverhead(what) && r.end > r.start) {
    ++stats_.cupti_overheads;
    stats_.cupti_overhead_ns += r.end - r.start;
  }
  if (LIVEPROF_RAW(r, objectKind) != CUPTI_ACTIVITY_OBJECT_THREAD) {
    ++stats_.ignored;
    return;
  }
  const uint64_t start = r.start;
  const uint64_t end = r.end;
  if (!Timed(start, end)) return;
  const NameId name = stream_.names().Intern(OverheadName(what));
  const uint64_t ts = ToHost(start);
  HostEvent(EventKind::kHostSpan, ts, EndToHost(start, end, ts), name, ThreadTrack(r.objectId.pt.threadId),
            r.correlationId, out);
}

// ---------------------------------------------------------------------------
// Caches.

NameId CuptiRecordParser::KernelName(const char* name) {
  if (name == nullptr) [[unlikely]]
    return stream_.names().Intern(name);
  const size_t hash = Hashed(reinterpret_cast<uintptr_t>(name));
  NameSlot& s = names_.Find(hash, [name](const NameSlot& slot) { return slot.key == name; });
  if (s.hash != 0) [[likely]]
    return s.id;
  const NameId id = options_.recorded ? RecordedKernelName(name) : stream_.names().Intern(DemangledKernelName(name));
  s = NameSlot{hash, name, id};
  names_.Added();
  return id;
}

NameId CuptiRecordParser::RecordedKernelName(const char* pointer) {
  const uint64_t key = reinterpret_cast<uintptr_t>(pointer);
  if (options_.recorded_kernel_names != nullptr) {
    const auto it = options_.recorded_kernel_names->find(key);
    if (it != options_.recorded_kernel_names->end()) {
      return stream_.names().Intern(DemangledKernelName(it->second.c_str()));
    }
  }
  char text[40];
  std::snprintf(text, sizeof text, "kernel 0x%llx", static_cast<unsigned long long>(key));
  return stream_.names().Intern(std::string_view(text));
}

void CuptiRecordParser::ForgetKernelNames() { names_ = ProbeTable<NameSlot>(); }

NameId CuptiRecordParser::Details(const DetailsKey& key) {
  // Independent multiplies (no chain through the five words).
  const uint64_t h = key.w[0] * 0x9e3779b97f4a7c15ull + key.w[1] * 0xc2b2ae3d27d4eb4full +
                     key.w[2] * 0x165667b19e3779f9ull + key.w[3] * 0x85ebca77c2b2ae63ull +
                     key.w[4] * 0x27d4eb2f165667c5ull;
  const size_t hash = Hashed(h);
  DetailsSlot& s = details_.Find(hash, [&key](const DetailsSlot& slot) { return slot.key == key; });
  if (s.hash != 0) [[likely]]
    return s.id;
  char text[192];
  std::snprintf(text, sizeof text, "regs:%u static_shared:%u dynamic_shared:%u grid:%u,%u,%u block:%u,%u,%u",
                Lo(key.w[0]), Hi(key.w[0]), Lo(key.w[1]), Hi(key.w[1]), Lo(key.w[2]), Hi(key.w[2]), Lo(key.w[3]),
                Hi(key.w[3]), Lo(key.w[4]));
  const NameId id = stream_.names().Intern(std::string_view(text));
  s = DetailsSlot{hash, key, id};
  details_.Added();
  return id;
}

NameId CuptiRecordParser::ApiName(bool driver, uint32_t cbid) {
  if (cbid >= kMaxCachedCbid) [[unlikely]]
    return InternApiName(driver, cbid);
  NameId& id = (driver ? driver_names_ : runtime_names_)[cbid];
  if (id == 0) [[unlikely]]
    id = InternApiName(driver, cbid);
  return id;
}

NameId CuptiRecordParser::InternApiName(bool driver, uint32_t cbid) {
  const char* name = options_.api_name ? options_.api_name(driver, cbid) : nullptr;
  if (name == nullptr || *name == '\0') name = BuiltinCuptiApiName(driver, cbid);
  if (name != nullptr) return stream_.names().Intern(StripCuptiVersion(name));
  char text[48];
  std::snprintf(text, sizeof text, "%s#%u", driver ? "cuda_driver_api" : "cuda_runtime_api", cbid);
  return stream_.names().Intern(std::string_view(text));
}

TrackId CuptiRecordParser::StreamTrack(uint32_t device, uint32_t stream) {
  return Track(kGpuTrackBit | (uint64_t{device} << 32) | stream);
}

TrackId CuptiRecordParser::ThreadTrack(uint32_t thread_id) { return Track(thread_id); }

TrackId CuptiRecordParser::AllocationTrack(uint32_t device) { return Track(kAllocationTrackBit | device); }

TrackId CuptiRecordParser::PoolTrack(uint32_t device) { return Track(kPoolTrackBit | device); }

TrackId CuptiRecordParser::ProcessMarkerTrack() { return Track(kMarkerTrackKey); }

TrackId CuptiRecordParser::Track(uint64_t key) {
  const size_t hash = Hashed(key);
  TrackSlot& s = tracks_.Find(hash, [key](const TrackSlot& slot) { return slot.key == key; });
  if (s.hash != 0) [[likely]]
    return s.id;
  const TrackId id = AddTrackSlow(key);
  s = TrackSlot{hash, key, id};
  tracks_.Added();
  return id;
}

TrackId CuptiRecordParser::AddTrackSlow(uint64_t key) {
  NameTable& names = stream_.names();
  const uint32_t id = static_cast<uint32_t>(key);
  if ((key & kGpuTrackBit) != 0) {
    const uint32_t device = static_cast<uint32_t>((key & ~kGpuTrackBit) >> 32);
    const std::string name = "GPU " + std::to_string(device) + " stream " + std::to_string(id);
    return stream_.AddTrack(TrackInfo{names.Intern(name), TrackType::kGpuStream, id, DeviceOrdinal(device)});
  }
  if ((key & kAllocationTrackBit) != 0) {
    // Instants, not a counter (a counter row folds its events' values);
    // os_id: no thread has it.
    const std::string name = "GPU " + std::to_string(id) + " allocations";
    return stream_.AddTrack(TrackInfo{names.Intern(name), TrackType::kHostThread, kNoThreadId, DeviceOrdinal(id)});
  }
  if ((key & kPoolTrackBit) != 0) {
    const std::string name = "GPU " + std::to_string(id) + " memory pool";
    return stream_.AddTrack(TrackInfo{names.Intern(name), TrackType::kCounter, id, DeviceOrdinal(id)});
  }
  if (key == kMarkerTrackKey) {
    return stream_.AddTrack(TrackInfo{names.Intern("CUDA markers"), TrackType::kHostThread, kNoThreadId, 0});
  }
  if (options_.os_thread_ids) {
    // The host API's track for this OS thread, if it already made one.
    const uint32_t n = stream_.track_count();
    for (TrackId t = 1; t < n; ++t) {
      const TrackInfo info = stream_.track(t);
      if (info.type == TrackType::kHostThread && info.os_id == id) return t;
    }
    const std::string name = "CUDA API thread " + std::to_string(id);
    return stream_.AddTrack(TrackInfo{names.Intern(name), TrackType::kHostThread, id, 0});
  }
  char name[48];
  std::snprintf(name, sizeof name, "CUDA API thread 0x%x", id);
  return stream_.AddTrack(TrackInfo{names.Intern(std::string_view(name)), TrackType::kHostThread, id, 0});
}

// ---------------------------------------------------------------------------
// The walk.

CuptiRecordParser::Result CuptiRecordParser::Parse(const uint8_t* buffer, size_t valid_size, SpscRing& out) {
  result_ = Result{};
  anchored_ = false;
  slope_ = clock_->slope();
  ++stats_.buffers;
  stats_.bytes += valid_size;
  if (valid_size == 0) return result_;
  Diagnostics& diag = stream_.diagnostics();
  if (buffer == nullptr || reinterpret_cast<uintptr_t>(buffer) % ACTIVITY_RECORD_ALIGNMENT != 0) {
    diag.Add(Diag::cupti_truncated_buffer);
    result_.complete = false;
    return result_;
  }
  size_t offset = 0;
  while (offset < valid_size) {
    const size_t left = valid_size - offset;
    const uint8_t* p = buffer + offset;
    uint32_t kind = 0;
    if (left < sizeof kind) {
      diag.Add(Diag::cupti_truncated_buffer);
      result_.complete = false;
      break;
    }
    std::memcpy(&kind, p, sizeof kind);
    // The buffer is megabytes CUPTI wrote on another core: fetch 1 KiB
    // ahead, three lines (most of a kernel record) per record. A prefetch
    // never faults, so past the buffer's end is harmless.
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(p) + 1024;
    __builtin_prefetch(reinterpret_cast<const void*>(ahead));
    __builtin_prefetch(reinterpret_cast<const void*>(ahead + 64));
    __builtin_prefetch(reinterpret_cast<const void*>(ahead + 128));
    size_t size = 0;
    bool converted = true;
    switch (kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        size = sizeof(KernelRec);
        if (size <= left) Convert(As<KernelRec>(p), out);
        break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER:
      case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API:
        size = sizeof(ApiRec);
        if (size <= left) Convert(As<ApiRec>(p), out);
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        size = sizeof(MemcpyRec);
        if (size <= left) Convert(As<MemcpyRec>(p), out);
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY2:
        size = sizeof(PeerCopyRec);
        if (size <= left) Convert(As<PeerCopyRec>(p), out);
        break;
      case CUPTI_ACTIVITY_KIND_MEMSET:
        size = sizeof(MemsetRec);
        if (size <= left) Convert(As<MemsetRec>(p), out);
        break;
      case CUPTI_ACTIVITY_KIND_MEMORY2:
        size = sizeof(MemoryRec);
        if (size <= left) Convert(As<MemoryRec>(p), out);
        break;
      case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
        size = sizeof(PoolRec);
        if (size <= left) Convert(As<PoolRec>(p), out);
        break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        size = sizeof(ExternalRec);
        if (size <= left) Convert(As<ExternalRec>(p), out);
        break;
      case CUPTI_ACTIVITY_KIND_MARKER:
        size = sizeof(MarkerRec);
        if (size <= left) Convert(As<MarkerRec>(p), out);
        break;
      case CUPTI_ACTIVITY_KIND_OVERHEAD:
        size = sizeof(OverheadRec);
        if (size <= left) Convert(As<OverheadRec>(p), out);
        break;
      default:
        size = IgnoredRecordSize(kind);
        converted = false;
        break;
    }
    if (size == 0) {
      diag.Add(Diag::cupti_unknown_record);
      result_.complete = false;
      break;
    }
    if (size > left) {
      diag.Add(Diag::cupti_truncated_buffer);
      result_.complete = false;
      break;
    }
    if (!converted) ++stats_.ignored;
    ++stats_.by_kind[std::min<size_t>(kind, kKindSlots - 1)];
    ++result_.records;
    offset += size;
  }
  stats_.records += result_.records;
  stats_.events += result_.events;
  stats_.ring_full += result_.ring_full;
  return result_;
}

}  // namespace liveprof
