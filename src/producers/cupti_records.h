// CuptiRecordParser: turns one CUPTI activity buffer (the bytes CUPTI hands
// to the buffer-completed callback) into liveprof Events. It is the pure half
// of the CUPTI producer: no CUPTI library, no driver, no threads. The
// subscription (cupti_source.h) feeds it; tests feed it buffers of real
// CUpti_Activity* structs built by hand.
//
// The buffer is walked directly: read `kind`, view the record as the CUDA 13
// struct of that kind, advance by its size (records are packed and 8-byte
// aligned, so sizeof(struct) is the stride). What becomes what:
//
//   CONCURRENT_KERNEL, KERNEL (Kernel10)  kKernel on the (device, stream) track;
//        corr = correlationId; payload.kernel.details = interned
//        "regs:R static_shared:S dynamic_shared:D grid:x,y,z block:x,y,z";
//        context = contextId; graph_id = graphId (and kFlagGraph when it is
//        not 0); op = the framework op of the launch (see below).
//   MEMCPY (Memcpy6), MEMCPY2 (MemcpyPtoP4)  kMemcpy* by copyKind (arrays
//        count as device memory; an unknown kind is kMemcpyOther);
//        payload.copy {bytes, src_kind, dst_kind} as MemoryKind values.
//   MEMSET (Memset4)      kMemset; payload.copy.bytes, dst_kind = memoryKind.
//   MEMORY2 (Memory4)     kAlloc / kFree (instant); name "cuda" or, for the
//        stream-ordered allocator (isAsync), "cuda_async"; sub = MemoryKind;
//        corr = correlationId; track = the GPU stream for async operations,
//        else the device's memory track ("GPU <d> memory").
//   MEMORY_POOL (MemoryPool3)  for local pools: a kCounter
//        "memory/cuda_async/reserved_bytes" (pool size; 0 once destroyed),
//        the memory profile's counter contract (memory_state.h), on the
//        device's memory track. One pool per device is assumed (the default pool); with several the last
//        record wins.
//   RUNTIME, DRIVER, INTERNAL_LAUNCH_API (API)  kRuntimeApi on the calling
//        thread's track; corr = correlationId; name = the API function
//        ("cudaLaunchKernel"; the CUPTI version suffix "_v7000" is cut).
//   EXTERNAL_CORRELATION  no event: remembers correlationId -> externalId
//        for records of kind Options::op_external_kind (see below).
//   MARKER (Marker2)      NVTX: a start/end pair (same id) becomes one
//        kHostSpan on the thread of its start (markers of no thread: the
//        "CUDA markers" track); an instantaneous marker a kInstant. The NVTX domain is not part of the name.
//   OVERHEAD (Overhead3)  a kHostSpan "CUPTI overhead: <what>" on the thread
//        it charged; overheads charged to a device or process are counted.
//        CUPTI's own (not CUDA's lazy loading or JIT) are summed in Stats.
//   SYNCHRONIZATION (Synchronization2)  counted only: the API record of the
//        same call already is the span on the right thread, and a sync
//        record does not say which thread waited.
//   DEVICE, CONTEXT, NAME, STREAM, MODULE, FUNCTION... (a known struct)
//        counted and skipped by size.
//   anything else         the size is unknown, so the rest of the buffer is
//        skipped: Diag::cupti_unknown_record.
// Records without a timestamp (start = end = 0, or end before start) are
// left out and counted (Diag::cupti_no_timestamp); a buffer that ends inside
// a record, or is not 8-byte aligned, stops there (cupti_truncated_buffer).
//
// Framework ops (payload.kernel.op). The host side pushes the NameId of the
// framework op it is running as a CUPTI external correlation id of kind
// op_external_kind (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 by default, out
// of the way of Kineto's CUSTOM0/1): cuptiActivityPushExternalCorrelationId
// (kind, name_id) at op begin, Pop at op end. CUPTI then writes one
// EXTERNAL_CORRELATION record per API call made under it, tying the call's
// correlation id to the top of that stack. Pushing only at the outermost op
// gives the outermost op, as event.h asks. The parser keeps the last
// kCorrTableSize correlation ids (a direct-mapped table, no allocation);
// device work whose mapping arrives AFTER it (a later buffer) keeps op 0.
//
// CUDA Graphs: every kernel, copy and memset of one graph launch carries the
// correlation id of the cudaGraphLaunch call, so they all join that launch
// (corr) and share its op; graphId != 0 sets kFlagGraph (and, for kernels,
// payload.kernel.graph_id).
//
// Strings: CUPTI owns every char* in a record, so names are copied into the
// stream's NameTable. A kernel's name is one pointer that CUPTI shares by
// every record of that kernel ("should not be modified", cupti_activity.h),
// so kernel names are cached by the pointer alone: a hit is one probe, no
// string hashing, no mutex, no string compare (checking the text on every
// hit cost 30 % of BM_CuptiParse). The one case this trusts CUPTI on: a
// module unloaded and its name memory reused for another name; the owner
// calls ForgetKernelNames() when it knows of an unload. Details strings are
// cached by their launch tuple, tracks by (device, stream) or thread id, API
// names per callback id. The caches never evict (see ProbeTable).
//
// Time: every CUPTI timestamp (device and API records share CUPTI's clock,
// the one cuptiGetTimestamp reads) is mapped onto the host clock through
// Options::clock; null means CUPTI ns already are host ns. A live buffer is
// mapped by one line (the map's at its first timestamp, the current slope:
// its records span ~150 ms); a recording's by the map at every timestamp
// (a buffer may span seconds, and its pairs are all known).
//
// Threads: one thread at a time uses a parser (it owns caches and the
// ClockMap it reads); Parse() writes to a ring of which that thread must be
// the single producer. It never blocks the profiled program: NameTable and
// Stream::AddTrack take their own mutexes only on a cache miss.
#ifndef LIVEPROF_PRODUCERS_CUPTI_RECORDS_H_
#define LIVEPROF_PRODUCERS_CUPTI_RECORDS_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stream/clock.h"
#include "stream/event.h"
#include "stream/spsc_ring.h"
#include "stream/stream.h"

namespace liveprof {

class CuptiRecordParser {
 public:
  // CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 (checked against the header in
  // the .cc): the external-correlation kind under which framework ops are
  // pushed.
  static constexpr uint32_t kOpExternalKind = 5;
  // Correlation ids remembered for the op lookup (a power of two).
  static constexpr size_t kCorrTableSize = size_t{1} << 16;
  // NVTX ranges open at once; more starts are counted and dropped.
  static constexpr size_t kMaxOpenMarkers = 4096;
  // Records counted per CUpti_ActivityKind; larger kinds share the last slot.
  static constexpr size_t kKindSlots = 64;
  // The CUPTI_API_VERSION whose record layouts this parser reads (checked
  // against the header in the .cc): CUPTI 13.0.
  static constexpr uint32_t kCuptiApiVersion = 130001;

  // "CONCURRENT_KERNEL", "MEMCPY"... for a CUpti_ActivityKind; "kind N" for
  // one this build does not name.
  static std::string KindName(uint32_t kind);

  // The name of API callback `cbid` of the driver (true) or runtime (false)
  // domain, or null if unknown. The source passes cuptiGetCallbackName; the
  // parser asks once per cbid and has a built-in table of the common calls.
  using ApiNameFn = std::function<const char*(bool driver, uint32_t cbid)>;

  struct Options {
    const ClockMap* clock = nullptr;  // CUPTI ns -> host ns; null: identity.
    uint32_t op_external_kind = kOpExternalKind;
    // True when CUPTI reports OS thread ids (the source sets
    // CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM): API spans then go on the track
    // the host API already made for that thread, if any. False: CUPTI's
    // default pthread_self() ids, each on a track of its own.
    bool os_thread_ids = true;
    // Free Overhead3::overheadData after reading it, as CUPTI asks of its
    // client. Off for fabricated buffers.
    bool owns_overhead_data = false;
    ApiNameFn api_name;
    // A recording's buffers (cupti_recording.h): their pointers (a kernel's
    // name, a marker's) belong to a process that is gone and are never
    // dereferenced. A kernel's name is then this map's string for the
    // pointer, else "kernel 0x<pointer>" (one name per pointer, so kernels
    // still group as they ran); a marker's is "NVTX range". Null: live
    // buffers, pointers read.
    const std::unordered_map<uint64_t, std::string>* recorded_kernel_names = nullptr;
    bool recorded = false;
    // The NameId of the framework op pushed under external id `id` (of
    // op_external_kind). Null: the id is a NameId of this stream (the live
    // CuptiSource pushes NameIds). A recording maps its ids through its
    // names; 0 means no op.
    std::function<NameId(uint64_t id)> op_name;
  };

  struct Result {
    size_t records = 0;    // records read (converted, counted or skipped).
    size_t events = 0;     // events published to the ring.
    size_t ring_full = 0;  // events lost because the ring was full.
    bool complete = true;  // false: the walk stopped early (diagnostic counted).
    uint64_t max_end = 0;  // host ns: the latest end of an event written (recordings only).
  };

  struct Stats {
    uint64_t buffers = 0;
    uint64_t bytes = 0;
    uint64_t records = 0;
    uint64_t events = 0;
    uint64_t ring_full = 0;
    uint64_t ignored = 0;                        // known kinds with no event (device, context, sync...).
    std::array<uint64_t, kKindSlots> by_kind{};  // index = CUpti_ActivityKind.
    // OVERHEAD records of CUPTI's own work (IsCuptiOwnOverhead: not CUDA's
    // lazy loading or JIT), whatever object they charge, and their time (end
    // - start, CUPTI ns): what CUPTI added to the program.
    uint64_t cupti_overheads = 0;
    uint64_t cupti_overhead_ns = 0;
  };

  // `stream` provides the name table, tracks and diagnostics; it must outlive
  // the parser.
  CuptiRecordParser(Stream& stream, Options options);
  explicit CuptiRecordParser(Stream& stream) : CuptiRecordParser(stream, Options()) {}
  ~CuptiRecordParser();
  CuptiRecordParser(const CuptiRecordParser&) = delete;
  CuptiRecordParser& operator=(const CuptiRecordParser&) = delete;

  // Parses the first `valid_size` bytes of `buffer` (8-byte aligned, as
  // CUPTI's are) and publishes the events into `out`. The parser's thread
  // only, which must be `out`'s producer.
  Result Parse(const uint8_t* buffer, size_t valid_size, SpscRing& out);

  // Drops the kernel-name cache, so that every kernel name pointer is read
  // again. For when CUPTI may have freed names (a module unloaded): until
  // then a pointer is trusted to keep its string (see the top of this file).
  // The parser's thread.
  void ForgetKernelNames();

  // Totals since construction. The parser's thread.
  const Stats& stats() const { return stats_; }

  // The track of GPU stream (device, stream), made on first use. The
  // parser's thread.
  TrackId StreamTrack(uint32_t device, uint32_t stream);
  // The track of a CUPTI thread id (see Options::os_thread_ids).
  TrackId ThreadTrack(uint32_t thread_id);
  // The track of device `device`'s allocations and frees that name no
  // stream (cudaMalloc, cudaFree, cudaMallocHost): "GPU <d> allocations";
  // and of its memory pool's size counter: "GPU <d> memory pool", a counter
  // track. Every event the parser writes is on a defined track (never 0).
  TrackId AllocationTrack(uint32_t device);
  TrackId PoolTrack(uint32_t device);
  // The track of markers that name no thread: "CUDA markers".
  TrackId ProcessMarkerTrack();

 private:
  // A cache that never evicts: open addressing with linear probing, load at
  // most 1/2, doubling when full (the only allocation, and rare: once the
  // working set of names, shapes and streams has been seen, none). Each slot
  // keeps its hash for the rehash; hash 0 is never stored (see Hashed()).
  template <typename Slot>
  class ProbeTable {
   public:
    ProbeTable() : slots_(kInitialSlots) {}
    // The slot holding a key with this hash that `match` accepts, or the
    // empty slot where it goes (then fill it and call Added()).
    template <typename Match>
    Slot& Find(size_t hash, Match&& match) {
      const size_t mask = slots_.size() - 1;
      for (size_t i = hash & mask;; i = (i + 1) & mask) {
        Slot& s = slots_[i];
        if (s.hash == 0 || (s.hash == hash && match(s))) return s;
      }
    }
    // After an empty slot was filled; references from Find() die here.
    void Added() {
      if (++size_ * 2 <= slots_.size()) return;
      std::vector<Slot> old(slots_.size() * 2);
      old.swap(slots_);
      const size_t mask = slots_.size() - 1;
      for (const Slot& s : old) {
        if (s.hash == 0) continue;
        size_t i = s.hash & mask;
        while (slots_[i].hash != 0) i = (i + 1) & mask;
        slots_[i] = s;
      }
    }
    size_t size() const { return size_; }

   private:
    static constexpr size_t kInitialSlots = 256;
    std::vector<Slot> slots_;
    size_t size_ = 0;
  };

  struct NameSlot {
    size_t hash = 0;
    const char* key = nullptr;  // CUPTI's pointer.
    NameId id = 0;
  };
  // Two 32-bit values per word, packed in registers (8-byte stores, so the
  // hash's 8-byte loads are forwarded): regs|static, dynamic|grid x,
  // grid y|z, block x|y, block z.
  struct DetailsKey {
    uint64_t w[5];
    bool operator==(const DetailsKey&) const = default;
  };
  struct DetailsSlot {
    size_t hash = 0;
    DetailsKey key{};
    NameId id = 0;
  };
  struct TrackSlot {
    size_t hash = 0;
    uint64_t key = 0;  // thread id, or kGpuTrackBit | device << 32 | stream.
    TrackId id = 0;
  };
  struct CorrSlot {
    uint32_t corr = 0;
    NameId op = 0;
  };
  struct OpenMarker {
    uint64_t ts;
    NameId name;
    TrackId track;
  };

  static constexpr uint32_t kMaxCachedCbid = 4096;

  // One converter per CUPTI record struct: explicit specializations in the
  // .cc, the only place that sees the CUPTI headers.
  template <typename Rec>
  void Convert(const Rec& r, SpscRing& out);
  void CopyEvent(EventKind kind, uint64_t start, uint64_t end, uint32_t device, uint32_t stream, uint32_t corr,
                 uint32_t graph_id, uint64_t bytes, uint32_t src_kind, uint32_t dst_kind, SpscRing& out);

  NameId KernelName(const char* name);
  NameId Details(const DetailsKey& key);
  NameId ApiName(bool driver, uint32_t cbid);
  NameId InternApiName(bool driver, uint32_t cbid);
  NameId Op(uint32_t corr) const {
    const CorrSlot& s = corr_[corr & (kCorrTableSize - 1)];
    return s.corr == corr ? s.op : 0;
  }
  TrackId Track(uint64_t key);
  TrackId AddTrackSlow(uint64_t key);
  NameId RecordedKernelName(const char* pointer);

  // False (and counted) when [start, end] is no usable timestamp.
  bool Timed(uint64_t start, uint64_t end);
  // The clock's line for the Parse() in progress (slope_ read at its start),
  // anchored at its first timestamp: host = base_host_ + slope_ * (t -
  // base_other_), rounded to the ns (the ClockMap's own answer within 1 ns,
  // without a libm call per timestamp).
  // Inline on every record; a recording's clock map and the first reading's
  // anchor out of line.
  uint64_t ToHost(uint64_t t) {
    if (options_.recorded || !anchored_) [[unlikely]]
      return ToHostSlow(t);
    const double d = static_cast<double>(static_cast<int64_t>(t - base_other_));
    return base_host_ + static_cast<uint64_t>(RoundNs(d * slope_));
  }
  [[gnu::noinline]] uint64_t ToHostSlow(uint64_t t) {
    if (options_.recorded) return clock_->ToHost(t);
    Anchor(t);
    return ToHost(t);
  }
  uint64_t DurationToHost(uint64_t d) const { return static_cast<uint64_t>(RoundNs(static_cast<double>(d) * slope_)); }
  // A span's duration on the host clock, its begin mapped to `ts`. A
  // recording maps its end through the clock map too (its pairs span the
  // whole run: each reading lands between the two pairs around it), a live
  // buffer by the current slope.
  uint64_t EndToHost(uint64_t start, uint64_t end, uint64_t ts) const {
    if (!options_.recorded) [[likely]]
      return DurationToHost(end - start);
    const uint64_t host_end = clock_->ToHost(end);
    return host_end > ts ? host_end - ts : 0;
  }
  // Saturating: a corrupt record's times may be anywhere in 2^64.
  static int64_t RoundNs(double v) {
    if (v >= 9.2e18) [[unlikely]]
      return INT64_MAX;
    if (v <= -9.2e18) [[unlikely]]
      return INT64_MIN;
    return static_cast<int64_t>(v < 0 ? v - 0.5 : v + 0.5);
  }
  void Anchor(uint64_t t) {
    base_other_ = t;
    base_host_ = clock_->ToHost(t);
    anchored_ = true;
  }
  // The next ring slot, or null (ring full: counted). The caller writes
  // every field, then calls Publish().
  Event* Reserve(SpscRing& out) {
    Event* slot = out.TryReserve();
    if (slot == nullptr) [[unlikely]] {
      ++result_.ring_full;
      return nullptr;
    }
    // The slots a few events on, for writing (a prefetch never faults, so
    // past the ring's end is harmless; integer math keeps it defined).
    __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(slot) + 8 * sizeof(Event)), 1);
    return slot;
  }
  void Publish(SpscRing& out, const Event& e) {
    out.Publish();
    ++result_.events;
    // (a recording's player paces by it; live buffers skip the cost)
    if (options_.recorded) [[unlikely]]
      result_.max_end = std::max(result_.max_end, e.ts + e.dur);
  }
  void HostEvent(EventKind kind, uint64_t ts, uint64_t dur, NameId name, TrackId track, uint32_t corr, SpscRing& out);

  Stream& stream_;
  Options options_;
  ClockMap identity_clock_;
  const ClockMap* clock_;
  Result result_;  // of the Parse() in progress.
  bool anchored_ = false;
  uint64_t base_other_ = 0;
  uint64_t base_host_ = 0;
  double slope_ = 1.0;
  Stats stats_;

  ProbeTable<NameSlot> names_;  // kernel names, by CUPTI's pointer.
  ProbeTable<DetailsSlot> details_;
  ProbeTable<TrackSlot> tracks_;
  std::unique_ptr<CorrSlot[]> corr_;
  std::vector<NameId> runtime_names_;  // by cbid; 0: not yet asked.
  std::vector<NameId> driver_names_;
  std::unordered_map<uint32_t, OpenMarker> open_markers_;  // by marker id.
  std::array<NameId, kEventKindCount> kind_names_{};       // "MemcpyHtoD", "Memset"...
  NameId cuda_alloc_name_ = 0;
  NameId cuda_async_alloc_name_ = 0;
  NameId pool_counter_name_ = 0;
  NameId internal_launch_name_ = 0;
  NameId recorded_marker_name_ = 0;
};

}  // namespace liveprof

#endif  // LIVEPROF_PRODUCERS_CUPTI_RECORDS_H_
