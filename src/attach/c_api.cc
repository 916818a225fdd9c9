// liveprof's C ABI (liveprof_c.h): the host API, the sender and GPU tracing
// behind plain C functions, for the Python package (ctypes) and any FFI.
// InitializeInjection, the CUDA driver's entry point, is in injection.cc.
//
// Spans with a handle: a language without RAII (Python's `with`, whose
// __enter__ and __exit__ are two calls) keeps a small integer between begin
// and end, and the begin time, name and kind stay here, in the calling
// thread's table: one integer argument each way, the cheapest call ctypes
// makes. A handle is (generation << 12) | slot; the generation (never 0, so
// no handle is 0) catches a handle ended twice or on another thread.
#include "attach/liveprof_c.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attach/gpu.h"
#include "ingest/global_sender.h"
#include "producers/host_api.h"
#include "stream/clock.h"
#include "stream/diagnostics.h"
#include "stream/event.h"
#include "stream/stream.h"

using namespace liveprof;

namespace {

void CopyOut(const std::string& text, char* out, size_t size) {
  if (out == nullptr || size == 0) return;
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

// ---- the per-thread span table ----------------------------------------------

constexpr uint32_t kSlotBits = 12;
constexpr uint32_t kSlots = (1u << kSlotBits) - 1;  // 4,095 (slot 4,095 unused: a clean mask)

struct OpenSpan {
  uint64_t begin;
  NameId name;
  uint32_t generation;  // 0: free.
  EventKind kind;
  uint8_t sub;
};

// Each thread's table starts its generations from a process-wide counter,
// so that one thread's handle does not match another's slot (an end on
// the wrong thread is refused, not taken for that thread's span).
std::atomic<uint32_t> g_table_seed{0};

struct SpanTable {
  OpenSpan slots[kSlots] = {};
  uint16_t free[kSlots];
  uint32_t free_count = kSlots;
  uint32_t generation = g_table_seed.fetch_add(0x9E37, std::memory_order_relaxed);  // (spread apart)
  SpanTable() {
    for (uint32_t i = 0; i < kSlots; ++i) free[i] = static_cast<uint16_t>(kSlots - 1 - i);
  }
};

// Created at the thread's first span (96 KiB: kept off the TLS block, which
// a library loaded with dlopen must keep small), freed at its exit.
thread_local std::unique_ptr<SpanTable> t_spans;

bool SpanRecords(EventKind kind) {
  if (kind == EventKind::kHostSpan && !PythonScopesEnabled()) return false;
  return internal::Records(kind);
}

uint32_t BeginHandle(NameId name, EventKind kind, uint8_t sub) {
  if (!SpanRecords(kind)) return 0;
  SpanTable* t = t_spans.get();
  if (t == nullptr) [[unlikely]] {
    t_spans.reset(new (std::nothrow) SpanTable());  // (no exception across the C ABI)
    t = t_spans.get();
    if (t == nullptr) return 0;
  }
  if (t->free_count == 0) [[unlikely]] {
    GlobalStream().diagnostics().Add(Diag::span_stack_overflow);
    return 0;
  }
  const uint32_t slot = t->free[--t->free_count];
  t->generation = (t->generation + 1) & ((1u << (32 - kSlotBits)) - 1);
  if (t->generation == 0) t->generation = 1;
  OpenSpan& s = t->slots[slot];
  s.name = name;
  s.kind = kind;
  s.sub = sub;
  s.generation = t->generation;
  s.begin = internal::Now();
  return (t->generation << kSlotBits) | slot;
}

// ---- the GPU source (shared with injection.cc through gpu.h) ----------------

std::deque<liveprof_event> g_drained;  // liveprof_drain_local's leftovers.
std::mutex g_drain_mu;

}  // namespace

extern "C" {

int liveprof_abi_version(void) { return LIVEPROF_ABI_VERSION; }

uint32_t liveprof_intern(const char* utf8, size_t size) {
  if (utf8 == nullptr) return InternName(static_cast<const char*>(nullptr));
  try {
    return InternName(std::string_view(utf8, size));
  } catch (...) {  // no memory for the table: the placeholder, never an exception into C.
    return 0;
  }
}

uint64_t liveprof_now(void) { return internal::Now(); }

uint32_t liveprof_scope_begin(uint32_t name) { return BeginHandle(name, EventKind::kHostSpan, 0); }
uint32_t liveprof_op_begin(uint32_t name) { return BeginHandle(name, EventKind::kFrameworkOp, 0); }
uint32_t liveprof_input_begin(uint32_t name, int stage) {
  const int s = stage < 0 || stage > static_cast<int>(InputStage::kWait) ? 0 : stage;
  return BeginHandle(name, EventKind::kInputSpan, static_cast<uint8_t>(s));
}

void liveprof_span_end(uint32_t handle) {
  if (handle == 0) return;
  const uint64_t end = internal::Now();
  SpanTable* t = t_spans.get();
  const uint32_t slot = handle & ((1u << kSlotBits) - 1);
  if (t == nullptr || slot >= kSlots || t->slots[slot].generation != (handle >> kSlotBits)) {
    GlobalStream().diagnostics().Add(Diag::span_end_without_begin);
    return;
  }
  OpenSpan& s = t->slots[slot];
  s.generation = 0;
  t->free[t->free_count++] = static_cast<uint16_t>(slot);
  internal::Record(s.kind, s.name, s.begin, end - s.begin, 0, s.sub, 0, 0);
}

void liveprof_record_span(int kind, uint32_t name, uint64_t begin, uint64_t end, int stage) {
  const EventKind k = kind == 1 ? EventKind::kInputSpan : kind == 2 ? EventKind::kFrameworkOp : EventKind::kHostSpan;
  const int s = k != EventKind::kInputSpan || stage < 0 || stage > static_cast<int>(InputStage::kWait) ? 0 : stage;
  if (SpanRecords(k) && begin != 0 && end >= begin) {
    internal::Record(k, name, begin, end - begin, 0, static_cast<uint8_t>(s), 0, 0);
  }
}

void liveprof_record_step(int64_t step, uint32_t name, uint64_t begin, uint64_t end) {
  if (begin == 0 || end < begin) return;
  CountStep();  // (tracing on or off: a step of the program)
  if (internal::Enabled()) {
    internal::Record(EventKind::kStepMarker, name, begin, end - begin, 0, 0, static_cast<uint64_t>(step), 0);
  }
}

uint64_t liveprof_hook_end(uint64_t since) {
  const uint64_t now = internal::Now();
  AddHookTime(since != 0 && now > since ? now - since : 0);  // (0, or another core's later TSC: no time)
  return now;
}

void liveprof_hook_totals(uint64_t* ns, uint64_t* calls, uint64_t* steps) {
  const HookTotals t = ReadHookTotals();
  if (ns != nullptr) *ns = t.ns;
  if (calls != nullptr) *calls = t.calls;
  if (steps != nullptr) *steps = t.steps;
}

void liveprof_step_begin(int64_t step, uint32_t name) { StepBegin(step, name); }
void liveprof_step_end(int64_t step) { StepEnd(step); }
void liveprof_counter(uint32_t name, double value) { RecordCounter(name, value); }
void liveprof_instant(uint32_t name) { RecordInstant(name); }

void liveprof_set_enabled(int on) { SetTracingEnabled(on != 0); }
int liveprof_enabled(void) { return TracingEnabled() ? 1 : 0; }
void liveprof_set_level(int level) { SetHostTraceLevel(level); }
int liveprof_level(void) { return HostTraceLevel(); }
void liveprof_set_python_scopes(int on) { SetPythonScopesEnabled(on != 0); }
int liveprof_python_scopes(void) { return PythonScopesEnabled() ? 1 : 0; }

int liveprof_connect(const char* address, const char* program, int rank, char* error, size_t error_size) {
  return liveprof_connect_helper(address, program, rank, nullptr, 0, error, error_size);
}

int liveprof_connect_helper(const char* address, const char* program, int rank, const char* helper, uint64_t helper_of,
                            char* error, size_t error_size) {
  try {
    SenderOptions o;
    o.address = address != nullptr ? address : "";
    if (program != nullptr) o.program = program;
    o.rank = rank;
    if (helper != nullptr) o.helper = helper;
    o.helper_of = helper_of;
    std::string why;
    if (ConnectGlobalStream(o, &why)) return 0;
    CopyOut(why, error, error_size);
  } catch (const std::exception& e) {
    CopyOut(std::string("liveprof: connect: ") + e.what(), error, error_size);
  }
  return -1;
}

void liveprof_disconnect(uint64_t timeout_ns) {
  attach::GpuStop();  // CUPTI's last buffers first, so that the sender's last batch has them.
  DisconnectGlobalStream(timeout_ns);
}

int liveprof_get_status(liveprof_status* out) {
  if (out == nullptr || out->size < offsetof(liveprof_status, last_error)) return -1;
  liveprof_status s{};
  s.size = out->size;
  Stream& stream = GlobalStream();  // (first: its creation may connect to LIVEPROF_SERVER)
  const SenderStatus st = GlobalSenderStatus();
  s.running = st.running;
  s.connected = st.connected;
  s.events_sent = st.events_sent;
  s.batches_sent = st.batches_sent;
  s.batches_acked = st.batches_acked;
  s.batches_resent = st.batches_resent;
  s.batches_dropped = st.batches_dropped;
  s.connects = st.connects;
  s.events_refused = st.events_refused;
  s.ring_dropped = stream.TotalDropped();
  CopyOut(st.last_error, s.last_error, sizeof s.last_error);
  const attach::GpuState gpu = attach::GpuStatus();
  s.gpu_status = gpu.status;
  CopyOut(gpu.message, s.gpu_message, sizeof s.gpu_message);
  s.events_recorded = st.events_recorded;
  s.events_delivered = st.events_delivered;
  s.events_resent = st.events_resent;
  s.events_ring_dropped = st.events_ring_dropped;
  s.events_dropped_unacked = st.events_dropped_unacked;
  s.events_unsent_at_stop = st.events_unsent_at_stop;
  s.events_lost = st.events_lost();
  std::memcpy(out, &s, std::min(out->size, sizeof s));
  if (out->size < offsetof(liveprof_status, gpu_status)) {  // (a cut last_error still ends)
    reinterpret_cast<char*>(out)[out->size - 1] = '\0';
  }
  return 0;
}

int liveprof_gpu_start(const char* level, char* message, size_t message_size) {
  const attach::GpuState gpu = attach::GpuStart(level != nullptr ? level : "", /*in_cuinit=*/false);
  CopyOut(gpu.message, message, message_size);
  return gpu.status;
}

void liveprof_gpu_stop(void) { attach::GpuStop(); }

int liveprof_gpu_yield(const char* client) {
  try {
    return attach::GpuYield(client != nullptr ? client : "");
  } catch (...) {  // (no memory for a name: nothing done, never an exception into C)
    return 0;
  }
}

int liveprof_gpu_regain(char* message, size_t message_size) {
  try {
    std::string why;
    const int r = attach::GpuRegain(&why);
    CopyOut(why, message, message_size);
    return r;
  } catch (...) {
    CopyOut("out of memory", message, message_size);
    return 0;
  }
}

int liveprof_gpu_state(void) { return attach::GpuTracerState(); }

const char* liveprof_input_stage_name(int stage) {
  static const char* const kNames[] = {"unknown", "read", "advanced_read", "preprocess", "enqueue", "wait"};
  static_assert(std::size(kNames) == static_cast<size_t>(InputStage::kWait) + 1);
  return stage >= 0 && stage < static_cast<int>(std::size(kNames)) ? kNames[stage] : nullptr;
}

const char* liveprof_kind_name(int kind) {
  if (kind < 0 || kind > 255) return nullptr;
  const std::string_view name = EventKindName(static_cast<EventKind>(kind));
  return name == "unknown" ? nullptr : name.data();  // (static strings, NUL-terminated)
}

const char* liveprof_name(uint32_t id) {
  // The table's strings live as long as the process and are NUL-terminated.
  return GlobalStream().names().Get(id).data();
}

const char* liveprof_diagnostic(int i, uint64_t* value) {
  if (i < 0 || i > static_cast<int>(Diag::kCount)) return nullptr;
  if (i == static_cast<int>(Diag::kCount)) {  // the rings' drops, as the module always gave them.
    if (value != nullptr) *value = GlobalStream().TotalDropped();
    return "ring_dropped";
  }
  const Diag d = static_cast<Diag>(i);
  if (value != nullptr) *value = GlobalStream().diagnostics().Get(d);
  return DiagnosticInfo(d).name.data();
}

int64_t liveprof_drain_local(liveprof_event* out, size_t capacity) {
  if (GlobalSenderStatus().running) return -1;
  std::lock_guard<std::mutex> lock(g_drain_mu);
  Stream& stream = GlobalStream();
  std::vector<std::shared_ptr<Ring>> rings;
  stream.CopyRings(&rings);
  // Ticks to ns by the line from the readings at load to now (ReadTicksToNs):
  // a rough one, for tests.
  const TicksToNs line = ReadTicksToNs();
  for (const std::shared_ptr<Ring>& ring : rings) {
    ring->queue->Drain([&](std::span<Event> part) {
      for (const Event& e : part) {
        liveprof_event x{};
        x.ts_ns = line.At(e.ts);
        x.dur_ns = line.Dur(e.dur);
        x.step = e.kind == EventKind::kStepMarker ? static_cast<int64_t>(e.payload.raw[0]) : -1;
        if (e.kind == EventKind::kCounter) std::memcpy(&x.value, &e.payload.raw[0], sizeof x.value);
        x.name = e.name;
        x.track = ring->track;
        x.kind = static_cast<uint8_t>(e.kind);
        x.sub = e.sub;
        g_drained.push_back(x);
      }
    });
  }
  const size_t n = std::min(capacity, g_drained.size());
  std::copy_n(g_drained.begin(), n, out);
  g_drained.erase(g_drained.begin(), g_drained.begin() + static_cast<std::ptrdiff_t>(n));
  return static_cast<int64_t>(n);
}

}  // extern "C"
