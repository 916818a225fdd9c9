// The Event: the one fixed-size record that every producer writes and every
// consumer reads. 48 bytes, trivially copyable, no heap, no pointers that
// outlive the process except where a kind says so (NameDef).
//
// Time: `ts` and `dur` are nanoseconds on the host clock (CLOCK_MONOTONIC, see
// clock.h) once an event leaves the stream. Inside a ring whose time domain is
// kTscTicks they are raw TSC ticks; the drain loop converts them (one place,
// one calibration, and the record path stays a single rdtsc).
//
// Order: the stream delivers events in completion order, by end = ts + dur,
// children before their parents on ties (see reorder_buffer.h).
#ifndef LIVEPROF_STREAM_EVENT_H_
#define LIVEPROF_STREAM_EVENT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace liveprof {

using NameId = uint32_t;
using TrackId = uint32_t;

// Declared in liveprof.fbs (`enum EventKind`): this is its C++ spelling,
// checked against the schema value by value (event.cc). Explicit values:
// they are part of the binary wire and of files on disk. Never renumber;
// retire a value by leaving a gap.
enum class EventKind : uint8_t {
  kInvalid = 0,
  // Stream bookkeeping.
  kNameDef = 1,     // name = the id; payload.name_def = the string.
  kTrackDef = 2,    // track = the id; name = its display name; payload.track_def.
  kDeviceInfo = 3,  // device = ordinal; name = device name; payload.device_info.
  // Host spans (complete: ts + dur).
  kHostSpan = 10,     // a user scope (LIVEPROF_SCOPE).
  kStepMarker = 11,   // one training step; payload.step.step_num (TF's _r=1).
  kInputSpan = 12,    // input-pipeline work (data loading); sub = InputStage.
  kFrameworkOp = 13,  // a framework op (TF op, torch op); corr = external id.
  kRuntimeApi = 14,   // a CUDA runtime/driver API call (launch, memcpy, sync);
                      // corr = the CUPTI correlation id its device work carries;
                      // sub = ApiLayer.
  // Device activity (complete).
  kKernel = 20,      // corr = launch correlation id; payload.kernel.
  kMemcpyHtoD = 21,  // payload.copy, for every copy kind below.
  kMemcpyDtoH = 22,
  kMemcpyDtoD = 23,
  kMemcpyHtoH = 24,
  kMemcpyPtoP = 25,   // peer to peer, between two devices.
  kMemcpyOther = 26,  // a copy whose direction the producer did not know.
  kMemset = 27,       // payload.copy.bytes.
  // Memory (instant).
  kAlloc = 30,  // payload.memory; name = allocator; sub = MemoryKind; corr: see
                //   kFlagAllocAnnotation.
  kFree = 31,   // payload.memory; bytes may be 0 if the producer did not know.
  // Others (instant unless said).
  kCounter = 40,  // payload.counter.value; name = counter name.
  kInstant = 41,  // a point marker.
  kFlow = 42,     // a correlation link: corr = flow id; sub = FlowPhase.
};

// One past the largest value; tables indexed by kind use this size.
inline constexpr size_t kEventKindCount = 43;

// Human-readable kind name ("kernel", "step"...). "unknown" for gaps.
std::string_view EventKindName(EventKind kind);

// The inverse of EventKindName: the kind named `name` ("kernel",
// "memcpy_h2d"...), or nullopt for a name no kind has ("unknown" included).
// Any thread.
std::optional<EventKind> ParseEventKindName(std::string_view name);

// Memory kind, in `sub` of kAlloc / kFree. Values follow CUpti_ActivityMemoryKind.
enum class MemoryKind : uint8_t {
  kUnknown = 0,
  kPageable = 1,
  kPinned = 2,
  kDevice = 3,
  kManaged = 5,
  kHost = 16,  // ours: a host allocator that is not CUDA's (framework CPU heap).
};

// Input-pipeline stage of a kInputSpan, in `sub` (TF's `_ipl_stage_cat`,
// docs/semantics-tf.md §3.4): which host-side bucket its self time feeds.
enum class InputStage : uint8_t {
  kUnknown = 0,       // not said: classified from the name (tf.data op names), else "Unknown".
  kRead = 1,          // reading on demand ("Demanded file read").
  kAdvancedRead = 2,  // reading in advance (prefetch, interleave).
  kPreprocess = 3,    // decoding, augmentation, batching.
  kEnqueue = 4,       // handing the batch to the device (host-to-device).
  kWait = 5,          // the training loop waiting for the next batch (IteratorGetNext):
                      // suffers the stall, is not an input op (§3.4 item 1).
};

// Which CUDA API a kRuntimeApi call belongs to, in `sub`. Both launch: a
// kernel's correlation id may name either (Triton's kernels are launched with
// cuLaunchKernel); the PyTorch plugin's view ignores driver calls, as the
// plugin does (docs/semantics-pytorch.md §0).
enum class ApiLayer : uint8_t { kRuntime = 0, kDriver = 1 };

// Phase of a kFlow event, in `sub`.
enum class FlowPhase : uint8_t { kStart = 0, kStep = 1, kEnd = 2 };

// What kind of timeline a TrackId names; in payload.track_def.type.
enum class TrackType : uint8_t {
  kHostThread = 0,
  kGpuStream = 1,
  kCounter = 2,
  kProcess = 3,
};

// How a process that serves another (a DataLoader worker of a training
// process) is labelled: the served process's label, this, then what it
// is, "rank 0 · loader 1" (the ingest server names it so from the sender's
// hello; the analyses find the served process from it, Catalog::ServedProcess).
inline constexpr std::string_view kHelperLabelSeparator = " · ";

// Bits in Event::flags.
inline constexpr uint8_t kFlagNone = 0;
inline constexpr uint8_t kFlag16Bit = 1 << 0;  // kernel runs 16-bit math.
inline constexpr uint8_t kFlagLate = 1 << 1;   // arrived after the reorder window.
inline constexpr uint8_t kFlagGraph = 1 << 2;  // device work launched from a CUDA Graph.
// A ProfilerStep#N span numbered N + payload.step.step_num: a replay's later
// loop numbers its steps on from the last loop's (replay.h).
inline constexpr uint8_t kFlagStepShift = 1 << 3;
// A kAlloc whose corr is the name id of what the framework said of it
// (alloc_annotation.h: op, region, data type, shape), not a correlation id.
inline constexpr uint8_t kFlagAllocAnnotation = 1 << 4;

struct Event {
  uint64_t ts = 0;    // begin, ns on the host clock.
  uint64_t dur = 0;   // ns; 0 for instants.
  NameId name = 0;    // interned name (0 = empty name).
  TrackId track = 0;  // host thread, GPU stream or counter track.
  uint32_t corr = 0;  // correlation id (CUPTI launch, external op, flow id).
  EventKind kind = EventKind::kInvalid;
  uint8_t sub = 0;     // kind-specific small enum (MemoryKind, FlowPhase).
  uint8_t flags = 0;   // kFlag* bits.
  uint8_t device = 0;  // GPU ordinal for device events; 0 on the host.
  union Payload {
    struct {
      // kStepMarker: the user's step number. A kHostSpan / kFrameworkOp
      // with kFlagStepShift: what to add to its ProfilerStep#N number
      // (their payload is otherwise unused; keep it so).
      int64_t step_num;
      uint64_t reserved;
    } step;
    struct {
      uint64_t bytes;     // kMemcpy* / kMemset: bytes moved or set.
      uint32_t src_kind;  // kMemcpy*: MemoryKind of the source (0 unknown).
      uint32_t dst_kind;  // kMemcpy*: MemoryKind of the destination.
    } copy;
    struct {
      uint64_t address;
      uint64_t bytes;
    } memory;  // kAlloc / kFree.
    struct {
      NameId details;     // interned "regs:R static_shared:S ... grid:x,y,z block:x,y,z".
      uint32_t context;   // CUDA context id.
      uint32_t graph_id;  // CUDA Graph id, or 0.
      NameId op;          // the framework op active at launch (outermost), or 0.
    } kernel;
    struct {
      uint64_t memory_bytes;  // global memory capacity.
      uint32_t sm_count;
      uint8_t cc_major;  // compute capability.
      uint8_t cc_minor;
      uint16_t reserved;
    } device_info;
    struct {
      double value;
      uint64_t reserved;
    } counter;
    struct {
      const char* data;  // NUL-terminated, owned by the NameTable (lives as long as it).
      uint64_t size;
    } name_def;
    struct {
      uint64_t os_tid;  // OS thread id (kHostThread) or stream id (kGpuStream).
      TrackType type;
      uint8_t pad[3];
      // The process (worker) the track belongs to: 0 for this one; an ingest
      // source's worker id (ingest_server.h) for another's. A kProcess track
      // with the same number names the worker ("rank 3", "host:pid").
      uint32_t process;
    } track_def;
    uint64_t raw[2];
  } payload = {.raw = {0, 0}};

  uint64_t end() const { return ts + dur; }
};

// A duration above this is a negative number seen as unsigned (an end before
// its begin) or garbage: the analyses count it (Diag::bad_duration) and skip
// the event.
inline constexpr uint64_t kMaxEventDurationNs = uint64_t{1} << 62;

static_assert(sizeof(Event) == 48, "Event must stay 48 bytes: it is the ring slot");
static_assert(std::is_trivially_copyable_v<Event>, "Event crosses rings by memcpy");
static_assert(alignof(Event) == 8);

// True for activity that runs on a GPU (kernels, copies, memsets).
constexpr bool IsDeviceKind(EventKind k) { return k >= EventKind::kKernel && k <= EventKind::kMemset; }

// True for spans that run on a host thread.
constexpr bool IsHostSpanKind(EventKind k) { return k >= EventKind::kHostSpan && k <= EventKind::kRuntimeApi; }

constexpr bool IsMemcpyKind(EventKind k) { return k >= EventKind::kMemcpyHtoD && k <= EventKind::kMemcpyOther; }

// True for kinds that carry a duration (spans, kernels, copies).
constexpr bool IsSpanKind(EventKind k) {
  switch (k) {
    case EventKind::kHostSpan:
    case EventKind::kStepMarker:
    case EventKind::kInputSpan:
    case EventKind::kFrameworkOp:
    case EventKind::kRuntimeApi:
    case EventKind::kKernel:
    case EventKind::kMemcpyHtoD:
    case EventKind::kMemcpyDtoH:
    case EventKind::kMemcpyDtoD:
    case EventKind::kMemcpyHtoH:
    case EventKind::kMemcpyPtoP:
    case EventKind::kMemcpyOther:
    case EventKind::kMemset: return true;
    default: return false;
  }
}

}  // namespace liveprof

#endif  // LIVEPROF_STREAM_EVENT_H_
