// The host tracing API: what a training program calls to say what it is doing.
//
//   LIVEPROF_STEP(step_num);            // this scope is training step N (TF: _r=1)
//   LIVEPROF_INPUT("load_batch");       // input-pipeline work inside a step
//   LIVEPROF_OP("MatMul");              // a framework op
//   LIVEPROF_SCOPE("optimizer");        // any other span
//   LIVEPROF_INSTANT("checkpoint");     // a point in time
//   LIVEPROF_COUNTER("queue_depth", n); // a sampled value
//   LIVEPROF_ALLOC("gpu0", ptr, bytes); LIVEPROF_FREE("gpu0", ptr, bytes);
//
// Names given to the macros must be string literals (they are interned once
// per call site); for names known only at run time use Scope(InternName(s)).
//
// Each thread writes to its own ring in the process-wide GlobalStream(),
// created on first use. A record costs one TSC read per timestamp plus a
// 48-byte store; it never locks, never allocates after the thread's first
// event, never blocks, never throws. A full ring drops the event and counts
// it. A thread that exits keeps its last events: its ring is drained, then
// retired.
//
// Off switches: SetTracingEnabled(false) at run time (one relaxed load per
// record); the CMake option LIVEPROF_TRACING=OFF defines
// LIVEPROF_DISABLE_TRACING and every macro compiles to nothing.
#ifndef LIVEPROF_PRODUCERS_HOST_API_H_
#define LIVEPROF_PRODUCERS_HOST_API_H_

#include <atomic>
#include <cstdint>
#include <string_view>

#include "stream/clock.h"
#include "stream/event.h"
#include "stream/spsc_ring.h"
#include "stream/stream.h"

namespace liveprof {

// The stream the host API writes to: created on first use (ring capacity from
// LIVEPROF_RING_CAPACITY if set), never destroyed. Any thread.
Stream& GlobalStream();

// Sets the options GlobalStream() is created with. Returns false (and changes
// nothing) if it already exists. Call before the first record.
bool ConfigureGlobalStream(const Stream::Options& options);

// Interns a name in GlobalStream()'s table. Any thread. Null and over-long
// names are mapped and counted, never rejected (see NameTable).
NameId InternName(std::string_view name);
NameId InternName(const char* name);

// Turns recording on or off for every thread (default on; LIVEPROF_ENABLED=0
// in the environment starts it off). Any thread.
void SetTracingEnabled(bool enabled);

// What is recorded while tracing is on, as TF's host_tracer_level (capture
// on demand, docs/ingest.md, turns it up and back down at run time):
//   1: steps, input-pipeline spans, counters, memory, instants, flows: what
//      the step breakdown, the input analysis and the alerts need;
//   2: + framework ops, runtime API calls and user scopes (the default);
//   3: + what costs the program more (TF's "verbose"): under `liveprof run`,
//      each PyTorch module's forward and backward and, on CUDA, the memory
//      its forward keeps (the Python hooks read the level, docs/attach.md).
//      Recorded here as level 2's kinds are.
// LIVEPROF_HOST_LEVEL=1|2|3 in the environment sets the start level. Any thread.
inline constexpr int kHostLevelCritical = 1;
inline constexpr int kHostLevelDetailed = 2;
inline constexpr int kHostLevelVerbose = 3;
void SetHostTraceLevel(int level);  // clamped to [1, 3].
int HostTraceLevel();
// The level at which a span of `kind` is recorded.
constexpr int HostLevelOf(EventKind kind) {
  return kind == EventKind::kHostSpan || kind == EventKind::kFrameworkOp || kind == EventKind::kRuntimeApi
             ? kHostLevelDetailed
             : kHostLevelCritical;
}
// Python's liveprof.scope() spans (src/python): on by default; capture on
// demand turns them on or off. Steps and input spans do not depend on it.
void SetPythonScopesEnabled(bool enabled);
bool PythonScopesEnabled();

// Opens / closes a span on this thread's span stack, for callers that cannot
// use RAII (the Python module). Ends match the innermost begin. An end with no
// begin counts span_end_without_begin; nesting deeper than kMaxOpenSpans
// counts span_stack_overflow.
inline constexpr int kMaxOpenSpans = 64;
void BeginSpan(NameId name, EventKind kind = EventKind::kHostSpan, uint32_t corr = 0);
void EndSpan();

// Marks the start / end of training step `step_num` on this thread. A begin
// while a step is open ends that step first (as torch.profiler's step()); an
// end with no open step of that number counts step_end_without_begin.
void StepBegin(int64_t step_num, NameId name = 0);
void StepEnd(int64_t step_num);

// liveprof's own hooks in this process (the Python package's, under
// `liveprof run`: the DataLoader, optimizer, backward and module hooks,
// docs/attach.md) measure their own time: each hook body adds the TSC ticks
// from its first clock reading to its end (AddHookTime: the C ABI's
// liveprof_hook_end). The sender sends the totals with liveprof's own cost
// (IngestBatch.cost) and the server shows the time per step: the steps are
// every training step the process marks (StepScope, StepBegin/StepEnd,
// liveprof_record_step), whether tracing is on or not (except a StepBegin
// that ends the step before it: counted while it is on). A fork's child starts
// from 0. Any thread: relaxed atomics, never blocks.
// CUPTI's own time in the process (its OVERHEAD records of its own work,
// CuptiRecordParser::Stats::cupti_overhead_ns) is added by the CUPTI source
// as it parses them, and read with the hooks': the server shows it per step
// beside theirs.
struct HookTotals {
  uint64_t ns = 0;                 // the hook bodies' time, on the host clock (ticks mapped at the reading).
  uint64_t calls = 0;              // hook bodies measured.
  uint64_t steps = 0;              // training steps marked.
  uint64_t cupti_overhead_ns = 0;  // CUPTI's OVERHEAD records of its own work, so far.
};
void AddHookTime(uint64_t ticks);
void AddCuptiOverhead(uint64_t ns);
void CountStep();
HookTotals ReadHookTotals();

// Host API ticks (internal::Now(): the TSC, or ns where there is none) on
// the host clock, by the line through the two clocks' readings at the
// library's load and now; before a millisecond has passed to measure it, a
// nominal rate (1 tick per ns without a TSC, else 3: a TSC of a few GHz).
// ReadHookTotals' and the C ABI's liveprof_drain_local. Any thread.
struct TicksToNs {
  uint64_t origin_ticks = 0, origin_ns = 0;
  double ticks_per_ns = 1;
  uint64_t Dur(uint64_t ticks) const { return static_cast<uint64_t>(static_cast<double>(ticks) / ticks_per_ns); }
  uint64_t At(uint64_t ticks) const {
    const double since = static_cast<double>(static_cast<int64_t>(ticks - origin_ticks)) / ticks_per_ns;
    return origin_ns + static_cast<uint64_t>(static_cast<int64_t>(since));
  }
};
TicksToNs ReadTicksToNs();

namespace internal {

extern std::atomic<bool> g_enabled;
extern std::atomic<int> g_level;

// This thread's ring and track, trivially constructed so the hot path is a
// plain TLS load. Null until the thread's first record.
struct ThreadSlot {
  SpscRing* queue;
  TrackId track;
};
extern thread_local ThreadSlot t_slot;

// Slow path: creates and registers this thread's ring. Returns null (and
// counts no_ring_dropped) if it cannot, or if the thread is exiting.
SpscRing* AcquireThreadRing();

inline bool Enabled() {
#ifdef LIVEPROF_DISABLE_TRACING
  return false;
#else
  return g_enabled.load(std::memory_order_relaxed);
#endif
}
// Tracing is on and the level records `kind` (two relaxed loads).
inline bool Records(EventKind kind) {
  return Enabled() && g_level.load(std::memory_order_relaxed) >= HostLevelOf(kind);
}

// Host API timestamps: raw TSC ticks (converted by the drain loop).
inline uint64_t Now() { return TscRead(); }

// Reserves this thread's next slot, or null (full ring: counted).
inline Event* Reserve() {
  SpscRing* q = t_slot.queue;
  if (q == nullptr) [[unlikely]] {
    q = AcquireThreadRing();
    if (q == nullptr) return nullptr;
  }
  return q->TryReserve();
}
inline void Publish() { t_slot.queue->Publish(); }

inline void Record(EventKind kind, NameId name, uint64_t ts, uint64_t dur, uint32_t corr, uint8_t sub, uint64_t p0,
                   uint64_t p1) {
  Event* e = Reserve();
  if (e == nullptr) return;
  e->ts = ts;
  e->dur = dur;
  e->name = name;
  e->track = t_slot.track;
  e->corr = corr;
  e->kind = kind;
  e->sub = sub;
  e->flags = 0;
  e->device = 0;
  e->payload.raw[0] = p0;
  e->payload.raw[1] = p1;
  Publish();
}

}  // namespace internal

inline bool TracingEnabled() { return internal::Enabled(); }

// RAII span: timestamps at construction and destruction, one event at the end.
// Any thread. If tracing was off at construction, records nothing.
class Scope {
 public:
  explicit Scope(NameId name, EventKind kind = EventKind::kHostSpan, uint32_t corr = 0) {
    if (internal::Records(kind)) {
      name_ = name;
      kind_ = kind;
      corr_ = corr;
      begin_ = internal::Now();
    }
  }
  ~Scope() {
    if (begin_ != 0) {
      const uint64_t end = internal::Now();
      internal::Record(kind_, name_, begin_, end - begin_, corr_, 0, 0, 0);
    }
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  uint64_t begin_ = 0;  // 0: inactive (the TSC is never 0 once running).
  NameId name_ = 0;
  uint32_t corr_ = 0;
  EventKind kind_ = EventKind::kHostSpan;
};

// RAII training step: TF's Trace("train", step_num=n, _r=1).
class StepScope {
 public:
  explicit StepScope(int64_t step_num, NameId name = 0) {
    if (internal::Enabled()) {
      step_ = step_num;
      name_ = name;
      begin_ = internal::Now();
    }
  }
  ~StepScope() {
    if (begin_ != 0) {
      const uint64_t end = internal::Now();
      internal::Record(EventKind::kStepMarker, name_, begin_, end - begin_, 0, 0, static_cast<uint64_t>(step_), 0);
    }
    CountStep();
  }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  uint64_t begin_ = 0;
  int64_t step_ = 0;
  NameId name_ = 0;
};

// Point events. Any thread.
inline void RecordInstant(NameId name) {
  if (internal::Enabled()) {
    internal::Record(EventKind::kInstant, name, internal::Now(), 0, 0, 0, 0, 0);
  }
}
inline void RecordCounter(NameId name, double value) {
  if (internal::Enabled()) {
    uint64_t bits;
    static_assert(sizeof bits == sizeof value);
    __builtin_memcpy(&bits, &value, sizeof bits);
    internal::Record(EventKind::kCounter, name, internal::Now(), 0, 0, 0, bits, 0);
  }
}
// An allocation of `bytes` at `address` by allocator `name`.
inline void RecordAlloc(NameId allocator, uint64_t address, uint64_t bytes, MemoryKind kind = MemoryKind::kHost) {
  if (internal::Enabled()) {
    internal::Record(EventKind::kAlloc, allocator, internal::Now(), 0, 0, static_cast<uint8_t>(kind), address, bytes);
  }
}
// A free of `address` (bytes may be 0 if unknown; the memory aggregator
// remembers the size from the allocation).
inline void RecordFree(NameId allocator, uint64_t address, uint64_t bytes = 0, MemoryKind kind = MemoryKind::kHost) {
  if (internal::Enabled()) {
    internal::Record(EventKind::kFree, allocator, internal::Now(), 0, 0, static_cast<uint8_t>(kind), address, bytes);
  }
}
// Addresses for LIVEPROF_ALLOC / LIVEPROF_FREE: a pointer or an integer.
inline uint64_t AddressOf(const volatile void* p) { return reinterpret_cast<uintptr_t>(p); }
inline uint64_t AddressOf(uint64_t a) { return a; }

// One end of a flow arrow (launch -> kernel, producer -> consumer).
inline void RecordFlow(NameId name, uint32_t flow_id, FlowPhase phase) {
  if (internal::Enabled()) {
    internal::Record(EventKind::kFlow, name, internal::Now(), 0, flow_id, static_cast<uint8_t>(phase), 0, 0);
  }
}

}  // namespace liveprof

#define LIVEPROF_CONCAT_INNER(a, b) a##b
#define LIVEPROF_CONCAT(a, b) LIVEPROF_CONCAT_INNER(a, b)
#define LIVEPROF_NAME_ID(literal)                                            \
  [] {                                                                       \
    static const ::liveprof::NameId id = ::liveprof::InternName("" literal); \
    return id;                                                               \
  }()

#ifdef LIVEPROF_DISABLE_TRACING
#define LIVEPROF_SCOPE(name) static_assert(true)
#define LIVEPROF_OP(name) static_assert(true)
#define LIVEPROF_INPUT(name) static_assert(true)
#define LIVEPROF_STEP(step_num) ((void)sizeof(step_num))
#define LIVEPROF_INSTANT(name) ((void)0)
#define LIVEPROF_COUNTER(name, value) ((void)sizeof(value))
#define LIVEPROF_ALLOC(allocator, address, bytes) ((void)sizeof(address), (void)sizeof(bytes))
#define LIVEPROF_FREE(allocator, address, bytes) ((void)sizeof(address), (void)sizeof(bytes))
#else
#define LIVEPROF_SCOPE_KIND(name, kind)                         \
  ::liveprof::Scope LIVEPROF_CONCAT(liveprof_scope_, __LINE__)( \
      ::liveprof::TracingEnabled() ? LIVEPROF_NAME_ID(name) : 0, kind)
#define LIVEPROF_SCOPE(name) LIVEPROF_SCOPE_KIND(name, ::liveprof::EventKind::kHostSpan)
#define LIVEPROF_OP(name) LIVEPROF_SCOPE_KIND(name, ::liveprof::EventKind::kFrameworkOp)
#define LIVEPROF_INPUT(name) LIVEPROF_SCOPE_KIND(name, ::liveprof::EventKind::kInputSpan)
#define LIVEPROF_STEP(step_num)                                    \
  ::liveprof::StepScope LIVEPROF_CONCAT(liveprof_step_, __LINE__)( \
      (step_num), ::liveprof::TracingEnabled() ? LIVEPROF_NAME_ID("train") : 0)
#define LIVEPROF_INSTANT(name) ::liveprof::RecordInstant(LIVEPROF_NAME_ID(name))
#define LIVEPROF_COUNTER(name, value) ::liveprof::RecordCounter(LIVEPROF_NAME_ID(name), static_cast<double>(value))
#define LIVEPROF_ALLOC(allocator, address, bytes) \
  ::liveprof::RecordAlloc(LIVEPROF_NAME_ID(allocator), ::liveprof::AddressOf(address), static_cast<uint64_t>(bytes))
#define LIVEPROF_FREE(allocator, address, bytes) \
  ::liveprof::RecordFree(LIVEPROF_NAME_ID(allocator), ::liveprof::AddressOf(address), static_cast<uint64_t>(bytes))
#endif

#endif  // LIVEPROF_PRODUCERS_HOST_API_H_
