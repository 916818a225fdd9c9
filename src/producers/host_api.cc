#include "producers/host_api.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

namespace liveprof {
namespace internal {

std::atomic<bool> g_enabled{true};
std::atomic<int> g_level{kHostLevelDetailed};
std::atomic<bool> g_python_scopes{true};
thread_local ThreadSlot t_slot{nullptr, 0};

namespace {

// Written per step and per hook: lines of their own, apart from the flags
// every record reads.
alignas(64) std::atomic<uint64_t> g_steps_marked{0};  // CountStep()'s.
struct alignas(64) HookCounters {
  std::atomic<uint64_t> ticks{0};
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> cupti_overhead_ns{0};  // (once per CUPTI buffer)
};
HookCounters g_hooks;
// Both clocks read at load: the ticks' rate at a reading is measured since.
const uint64_t g_origin_tsc = TscRead();
const uint64_t g_origin_ns = HostNowNs();

// Non-trivial per-thread state, touched only on the slow path.
struct ThreadState {
  std::shared_ptr<Ring> ring;
  bool failed = false;
  // BeginSpan/EndSpan stack.
  struct Open {
    uint64_t begin;
    NameId name;
    uint32_t corr;
    EventKind kind;
  };
  Open spans[kMaxOpenSpans];
  int depth = 0;
  // StepBegin/StepEnd.
  bool step_open = false;
  int64_t step_num = 0;
  uint64_t step_begin = 0;
  NameId step_name = 0;

  ~ThreadState();
};
thread_local ThreadState t_state;
// Set when t_state is destroyed; trivially destructible, so it can be read
// safely by records made later in the thread's teardown.
thread_local bool t_exited = false;

ThreadState::~ThreadState() {
  // The thread is exiting: hand the ring over for a last drain.
  if (ring) ring->closed.store(true, std::memory_order_release);
  t_slot = {nullptr, 0};
  t_exited = true;
}

std::mutex g_config_mu;
Stream::Options g_options;
std::atomic<Stream*> g_stream{nullptr};

size_t CapacityFromEnv(size_t fallback) {
  const char* s = std::getenv("LIVEPROF_RING_CAPACITY");
  if (s == nullptr || *s == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s || *end != '\0') {
    std::fprintf(stderr,
                 "liveprof: LIVEPROF_RING_CAPACITY='%s' is not a number of events; "
                 "using %zu\n",
                 s, fallback);
    return fallback;
  }
  return static_cast<size_t>(v);  // 0 or too large is refused, and said, by AddRing.
}

std::string ThreadName(long tid) {
  char comm[32] = {};
  pthread_getname_np(pthread_self(), comm, sizeof comm);
  return std::string(comm[0] ? comm : "thread") + " " + std::to_string(tid);
}

SpscRing* CreateThreadRing() {
  Stream& stream = GlobalStream();
  if (t_exited || t_state.failed) {
    stream.diagnostics().Add(Diag::no_ring_dropped);
    return nullptr;
  }
  const long tid = syscall(SYS_gettid);
  const std::string name = ThreadName(tid);
  const TrackId track =
      stream.AddTrack(TrackInfo{stream.names().Intern(name), TrackType::kHostThread, static_cast<uint64_t>(tid), 0});
  std::string error;
  std::shared_ptr<Ring> ring =
      stream.AddRing({.name = name,
                      .domain = TimeDomain::kTscTicks,
                      .capacity = 0,
                      .track = track,
                      .progress = RingProgress::kWritesAtEnd},  // a span is written as it ends.
                     &error);
  ThreadState& st = t_state;
  if (ring == nullptr) {
    st.failed = true;
    stream.diagnostics().Add(Diag::no_ring_dropped);
    std::fprintf(stderr, "liveprof: %s; this thread's events are dropped and counted\n", error.c_str());
    return nullptr;
  }
  st.ring = ring;
  t_slot = {ring->queue.get(), track};
  return t_slot.queue;
}

// A fork's child (the forking thread): its ring is the parent's.
void ForgetThreadRingInForkChild() {
  if (t_exited) return;
  t_state.ring.reset();  // (the parent's ring, gone from the child's stream)
  t_state.failed = false;
  t_slot = {nullptr, 0};
}

}  // namespace

SpscRing* AcquireThreadRing() {
  // Out of memory here must not reach the profiled program.
  try {
    return CreateThreadRing();
  } catch (...) {
    if (!t_exited) t_state.failed = true;
    GlobalStream().diagnostics().Add(Diag::no_ring_dropped);
    return nullptr;
  }
}

}  // namespace internal

// Defined by the ingest client library (src/ingest/ingest_sender.cc), which
// connects to LIVEPROF_SERVER; weak: a program without it has none. The host
// API never depends on the sender (docs/architecture.md).
extern "C" void liveprof_ingest_on_global_stream(void) __attribute__((weak));

namespace {

// fork(2): no lock of the stream may be held by another thread at the fork
// (the child would wait on it forever), and the child records on its own:
// the parent's rings, tracks and counts are the parent's (Stream::
// AfterForkInChild), and the forking thread, the child's only one, gets a
// new ring (and a track with its new thread id) at its next record. The
// sender, if any, is the ingest library's (its own handler).
void PrepareFork() {
  internal::g_config_mu.lock();
  if (Stream* s = internal::g_stream.load(std::memory_order_acquire)) s->LockForFork();
}
void AfterForkInParent() {
  if (Stream* s = internal::g_stream.load(std::memory_order_acquire)) s->UnlockAfterFork();
  internal::g_config_mu.unlock();
}
void AfterForkInChild() {
  if (Stream* s = internal::g_stream.load(std::memory_order_acquire)) s->AfterForkInChild();
  // The child's hooks and steps are its own (a DataLoader worker's fetches).
  internal::g_hooks.ticks.store(0, std::memory_order_relaxed);
  internal::g_hooks.calls.store(0, std::memory_order_relaxed);
  internal::g_hooks.cupti_overhead_ns.store(0, std::memory_order_relaxed);
  internal::g_steps_marked.store(0, std::memory_order_relaxed);
  internal::ForgetThreadRingInForkChild();
  internal::g_config_mu.unlock();
}

// Creates the global stream if it does not exist; true if this call did.
bool CreateGlobalStream() {
  std::lock_guard<std::mutex> lock(internal::g_config_mu);
  if (internal::g_stream.load(std::memory_order_relaxed) != nullptr) return false;
  Stream::Options options = internal::g_options;
  options.ring_capacity = internal::CapacityFromEnv(options.ring_capacity);
  if (const char* e = std::getenv("LIVEPROF_ENABLED"); e != nullptr && std::strcmp(e, "0") == 0) {
    internal::g_enabled.store(false, std::memory_order_relaxed);
  }
  if (const char* e = std::getenv("LIVEPROF_HOST_LEVEL"); e != nullptr && *e != '\0') {
    if ((e[0] == '1' || e[0] == '2' || e[0] == '3') && e[1] == '\0') {
      internal::g_level.store(e[0] - '0', std::memory_order_relaxed);
    } else {
      std::fprintf(stderr, "liveprof: LIVEPROF_HOST_LEVEL='%s' is not 1, 2 or 3; using %d\n", e,
                   internal::g_level.load(std::memory_order_relaxed));
    }
  }
  // Never destroyed: threads may record during static destruction.
  internal::g_stream.store(new Stream(options), std::memory_order_release);
  pthread_atfork(PrepareFork, AfterForkInParent, AfterForkInChild);
  return true;
}

}  // namespace

Stream& GlobalStream() {
  Stream* s = internal::g_stream.load(std::memory_order_acquire);
  if (s != nullptr) return *s;
    // LIVEPROF_SERVER connects once the stream exists, outside the lock (the
    // sender uses the stream), when the ingest client is linked in.
#ifndef LIVEPROF_DISABLE_TRACING
  if (CreateGlobalStream() && liveprof_ingest_on_global_stream != nullptr) liveprof_ingest_on_global_stream();
#else
  CreateGlobalStream();             // (nothing is recorded: nothing to send)
#endif
  return *internal::g_stream.load(std::memory_order_acquire);
}

bool ConfigureGlobalStream(const Stream::Options& options) {
  std::lock_guard<std::mutex> lock(internal::g_config_mu);
  if (internal::g_stream.load(std::memory_order_relaxed) != nullptr) return false;
  internal::g_options = options;
  return true;
}

NameId InternName(std::string_view name) { return GlobalStream().names().Intern(name); }
NameId InternName(const char* name) { return GlobalStream().names().Intern(name); }

void SetTracingEnabled(bool enabled) {
  GlobalStream();  // reads LIVEPROF_ENABLED first, so this call wins over it.
  internal::g_enabled.store(enabled, std::memory_order_relaxed);
}

void SetHostTraceLevel(int level) {
  GlobalStream();  // reads LIVEPROF_HOST_LEVEL first, so this call wins over it.
  internal::g_level.store(level < kHostLevelCritical  ? kHostLevelCritical
                          : level > kHostLevelVerbose ? kHostLevelVerbose
                                                      : level,
                          std::memory_order_relaxed);
}

int HostTraceLevel() {
  GlobalStream();
  return internal::g_level.load(std::memory_order_relaxed);
}

void SetPythonScopesEnabled(bool enabled) { internal::g_python_scopes.store(enabled, std::memory_order_relaxed); }

bool PythonScopesEnabled() { return internal::g_python_scopes.load(std::memory_order_relaxed); }

// A span the level (or the off switch) left out at its begin is still pushed,
// as kInvalid, so that its end pops it and nothing else: the level may change
// between a begin and its end.
void BeginSpan(NameId name, EventKind kind, uint32_t corr) {
  if (internal::t_exited) return;
  internal::ThreadState& st = internal::t_state;
  if (st.depth >= kMaxOpenSpans) {
    ++st.depth;  // keep counting so that the matching EndSpan calls balance.
    GlobalStream().diagnostics().Add(Diag::span_stack_overflow);
    return;
  }
  if (!internal::Records(kind)) {
    st.spans[st.depth++] = {0, 0, 0, EventKind::kInvalid};
    return;
  }
  st.spans[st.depth++] = {internal::Now(), name, corr, kind};
}

void EndSpan() {
  if (internal::t_exited) return;
  internal::ThreadState& st = internal::t_state;
  if (st.depth == 0) {
    if (internal::Enabled()) GlobalStream().diagnostics().Add(Diag::span_end_without_begin);
    return;
  }
  --st.depth;
  if (st.depth >= kMaxOpenSpans) return;  // its begin was not recorded.
  const internal::ThreadState::Open& o = st.spans[st.depth];
  if (o.kind == EventKind::kInvalid) return;  // left out at its begin.
  const uint64_t end = internal::Now();
  internal::Record(o.kind, o.name, o.begin, end - o.begin, o.corr, 0, 0, 0);
}

void AddHookTime(uint64_t ticks) {
  internal::g_hooks.ticks.fetch_add(ticks, std::memory_order_relaxed);
  internal::g_hooks.calls.fetch_add(1, std::memory_order_relaxed);
}

void AddCuptiOverhead(uint64_t ns) { internal::g_hooks.cupti_overhead_ns.fetch_add(ns, std::memory_order_relaxed); }

void CountStep() { internal::g_steps_marked.fetch_add(1, std::memory_order_relaxed); }

TicksToNs ReadTicksToNs() {
#if defined(__x86_64__) || defined(__i386__)
  constexpr double kNominal = 3.0;  // (TscRead: the TSC)
#else
  constexpr double kNominal = 1.0;  // (TscRead: HostNowNs)
#endif
  TicksToNs line;
  line.origin_ticks = internal::g_origin_tsc;
  line.origin_ns = internal::g_origin_ns;
  const uint64_t tsc = TscRead(), ns = HostNowNs();
  line.ticks_per_ns = ns > line.origin_ns + 1'000'000 && tsc > line.origin_ticks
                          ? static_cast<double>(tsc - line.origin_ticks) / static_cast<double>(ns - line.origin_ns)
                          : kNominal;
  return line;
}

HookTotals ReadHookTotals() {
  HookTotals t;
  const uint64_t ticks = internal::g_hooks.ticks.load(std::memory_order_relaxed);
  t.calls = internal::g_hooks.calls.load(std::memory_order_relaxed);
  t.steps = internal::g_steps_marked.load(std::memory_order_relaxed);
  t.cupti_overhead_ns = internal::g_hooks.cupti_overhead_ns.load(std::memory_order_relaxed);
  t.ns = ReadTicksToNs().Dur(ticks);
  return t;
}

void StepBegin(int64_t step_num, NameId name) {
  if (!internal::Enabled() || internal::t_exited) return;
  internal::ThreadState& st = internal::t_state;
  const uint64_t now = internal::Now();
  if (st.step_open) {
    CountStep();
    internal::Record(EventKind::kStepMarker, st.step_name, st.step_begin, now - st.step_begin, 0, 0,
                     static_cast<uint64_t>(st.step_num), 0);
  }
  st.step_open = true;
  st.step_num = step_num;
  st.step_begin = now;
  st.step_name = name;
}

void StepEnd(int64_t step_num) {
  if (!internal::Enabled() || internal::t_exited) {
    CountStep();  // (a step ended all the same: its hooks' time is per step)
    return;
  }
  internal::ThreadState& st = internal::t_state;
  if (!st.step_open || st.step_num != step_num) {
    GlobalStream().diagnostics().Add(Diag::step_end_without_begin);
    return;
  }
  st.step_open = false;
  CountStep();
  const uint64_t end = internal::Now();
  internal::Record(EventKind::kStepMarker, st.step_name, st.step_begin, end - st.step_begin, 0, 0,
                   static_cast<uint64_t>(st.step_num), 0);
}

}  // namespace liveprof
