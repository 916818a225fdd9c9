// _liveprof: the native half of the Python module (docs/python.md). The
// package liveprof/__init__.py is what users import; it re-exports the hot
// entry points from here and adds the pure-Python helpers (step, input,
// wrap_loader) on top of the private ones (_now, _record_span...).
//
// Why two kinds of binding: liveprof.scope(name) is on the hot path (the
// target is <= 1 us per `with`, bench/python_scope_bench.py), so it and the
// span object it returns are plain CPython C API (a METH_O function, a type
// with vectorcall-friendly __enter__/__exit__ and no per-call argument
// conversion). Everything called once per step or less (levels, counters,
// connect, status) goes through pybind11, which is easier to read.
//
// Names: each distinct Python string is interned once (NameTable) and its id
// kept in a dict keyed by the string's contents; past kMaxCachedNames
// entries new names are interned on every call instead of cached, so a
// program that makes names on the fly cannot grow the cache without bound.
//
// Threading: every function here runs with the GIL held (the GIL also guards
// the name cache). Recording writes to the calling thread's ring (host_api.h):
// lock-free and non-blocking, so the GIL is never released around it; only
// disconnect(), which waits for the server's acknowledgement, releases it.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "producers/host_api.h"
#include "ingest/ingest_sender.h"
#include "stream/clock.h"
#include "stream/diagnostics.h"
#include "stream/event.h"
#include "stream/stream.h"

namespace py = pybind11;

namespace liveprof {
namespace {

constexpr Py_ssize_t kMaxCachedNames = 1 << 16;
PyObject* g_names = nullptr;  // dict: str -> int (NameId). Owned by the module.
uint64_t g_import_tsc = 0, g_import_ns = 0;  // clock readings at import (TicksPerNs).

// The NameId of `str` (a str or a str subclass), or nullopt-like false with a
// Python error set.
bool NameIdOf(PyObject* str, NameId* id) {
  if (!PyUnicode_Check(str)) {
    PyErr_Format(PyExc_TypeError, "liveprof: a name must be a str, not %.100s",
                 Py_TYPE(str)->tp_name);
    return false;
  }
  if (PyObject* cached = PyDict_GetItemWithError(g_names, str); cached != nullptr) {
    *id = static_cast<NameId>(PyLong_AsUnsignedLong(cached));
    return true;
  }
  if (PyErr_Occurred()) return false;
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(str, &size);  // fails for lone surrogates.
  if (utf8 == nullptr) return false;
  try {
    *id = InternName(std::string_view(utf8, static_cast<size_t>(size)));
  } catch (...) {  // out of memory in the table: never into the program.
    PyErr_NoMemory();
    return false;
  }
  if (PyDict_Size(g_names) < kMaxCachedNames) {
    PyObject* value = PyLong_FromUnsignedLong(*id);
    if (value == nullptr) return false;
    const int rc = PyDict_SetItem(g_names, str, value);
    Py_DECREF(value);
    if (rc != 0) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Span: what liveprof.scope() and liveprof.input() return. One object per
// `with`; its state (the begin time) lives in the object, so nesting,
// recursion, generators and coroutines that suspend inside a `with` all
// close the right span. Whether it records is decided at __enter__ and kept
// until __exit__ (the level may change in between).

struct SpanObject {
  PyObject_HEAD
  uint64_t begin;  // raw TSC ticks; 0: not recording.
  NameId name;
  EventKind kind;
  uint8_t sub;      // InputStage for input spans.
  bool entered;
};

bool SpanRecords(EventKind kind) {
  if (kind == EventKind::kHostSpan && !PythonScopesEnabled()) return false;
  return internal::Records(kind);
}

PyObject* SpanEnter(PyObject* self, PyObject* /*unused*/) {
  SpanObject* s = reinterpret_cast<SpanObject*>(self);
  if (s->entered) {
    PyErr_SetString(PyExc_RuntimeError,
                    "liveprof: this span is already open (one `with` at a time per object)");
    return nullptr;
  }
  s->entered = true;
  s->begin = SpanRecords(s->kind) ? internal::Now() : 0;
  Py_INCREF(self);
  return self;
}

PyObject* SpanExit(PyObject* self, PyObject* const* /*args*/, Py_ssize_t /*nargs*/) {
  SpanObject* s = reinterpret_cast<SpanObject*>(self);
  if (s->begin != 0) {
    const uint64_t end = internal::Now();
    internal::Record(s->kind, s->name, s->begin, end - s->begin, 0, s->sub, 0, 0);
    s->begin = 0;
  }
  s->entered = false;
  Py_RETURN_NONE;  // falsy: an exception raised inside the `with` goes on.
}

PyObject* SpanRepr(PyObject* self) {
  const SpanObject* s = reinterpret_cast<const SpanObject*>(self);
  const std::string_view name = GlobalStream().names().Get(s->name);
  PyObject* str = PyUnicode_DecodeUTF8(name.data(), static_cast<Py_ssize_t>(name.size()), "replace");
  if (str == nullptr) return nullptr;
  PyObject* repr = PyUnicode_FromFormat("<liveprof.%s %R%s>",
                                        s->kind == EventKind::kInputSpan ? "input" : "scope", str,
                                        s->entered ? " (open)" : "");
  Py_DECREF(str);
  return repr;
}

PyMethodDef kSpanMethods[] = {
    {"__enter__", SpanEnter, METH_NOARGS, "Begins the span (if recording is on for its kind)."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(SpanExit)),
     METH_FASTCALL, "Ends the span and records it."},
    {nullptr, nullptr, 0, nullptr},
};

void SpanDealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_Free(self);
  Py_DECREF(type);  // a heap type: each instance holds a reference to it.
}

PyType_Slot kSpanSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(SpanDealloc)},
    {Py_tp_repr, reinterpret_cast<void*>(SpanRepr)},
    {Py_tp_methods, kSpanMethods},
    {Py_tp_doc, const_cast<char*>(
                    "A span: use it once in a `with` statement (liveprof.scope, liveprof.input).")},
    {0, nullptr},
};
PyType_Spec kSpanSpec = {"liveprof._liveprof.Span", sizeof(SpanObject), 0, Py_TPFLAGS_DEFAULT,
                         kSpanSlots};
PyTypeObject* g_span_type = nullptr;  // created at import; the module holds a reference.

PyObject* NewSpan(NameId name, EventKind kind, uint8_t sub) {
  SpanObject* s = PyObject_New(SpanObject, g_span_type);
  if (s == nullptr) return nullptr;
  s->begin = 0;
  s->name = name;
  s->kind = kind;
  s->sub = sub;
  s->entered = false;
  return reinterpret_cast<PyObject*>(s);
}

// scope(name): a user span (kHostSpan, host level 2, Python scopes switch).
PyObject* ScopeFn(PyObject* /*module*/, PyObject* name) {
  NameId id;
  if (!NameIdOf(name, &id)) return nullptr;
  return NewSpan(id, EventKind::kHostSpan, 0);
}

// _input_span(name, sub): an input-pipeline span (kInputSpan, level 1).
PyObject* InputSpanFn(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_input_span(name, stage) takes 2 arguments");
    return nullptr;
  }
  NameId id;
  if (!NameIdOf(args[0], &id)) return nullptr;
  const long sub = PyLong_AsLong(args[1]);
  if (sub == -1 && PyErr_Occurred()) return nullptr;
  if (sub < 0 || sub > static_cast<long>(InputStage::kWait)) {
    PyErr_Format(PyExc_ValueError, "liveprof: input stage %ld is not 0..5", sub);
    return nullptr;
  }
  return NewSpan(id, EventKind::kInputSpan, static_cast<uint8_t>(sub));
}

PyMethodDef kFastFunctions[] = {
    {"scope", ScopeFn, METH_O,
     "scope(name) -> a span for `with`: a user scope, recorded when tracing is on, the host "
     "level is 2 and Python scopes are on (checked at __enter__)."},
    {"_input_span",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(InputSpanFn)), METH_FASTCALL,
     "_input_span(name, stage) -> an input-pipeline span for `with`."},
    {nullptr, nullptr, 0, nullptr},
};

NameId NameIdOrThrow(const py::handle& name) {
  NameId id;
  if (!NameIdOf(name.ptr(), &id)) throw py::error_already_set();
  return id;
}

// Host-API ticks per ns, from the clock readings at import and now; 3 (a
// generous TSC rate) until 1 ms has passed. For conversions that need no
// precision: the loader's gap, tests.
double TicksPerNs() {
  const uint64_t tsc = internal::Now(), ns = HostNowNs();
  if (ns < g_import_ns + 1'000'000 || tsc <= g_import_tsc) return 3.0;
  return static_cast<double>(tsc - g_import_tsc) / static_cast<double>(ns - g_import_ns);
}

// _drain_local(): what this process recorded and nobody consumed, oldest
// first per thread, as dicts (kind, name, sub, ts and dur_ns in host ns by a
// rough line through two clock readings, step, value, track). For
// tests and the benchmark of a process that is not connected: rings have a
// single consumer, so it refuses while a sender runs.
py::list DrainLocal() {
  if (GlobalSenderStatus().running) {
    throw std::runtime_error("liveprof: _drain_local() while connected: the sender drains");
  }
  Stream& stream = GlobalStream();
  std::vector<std::shared_ptr<Ring>> rings;
  stream.CopyRings(&rings);
  std::vector<Event> events;
  std::vector<TrackId> tracks;
  for (const std::shared_ptr<Ring>& ring : rings) {
    ring->queue->Drain([&](std::span<Event> part) {
      for (const Event& e : part) {
        events.push_back(e);
        tracks.push_back(ring->track);
      }
    });
  }
  const double ns_per_tick = 1.0 / TicksPerNs();
  py::list out;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    py::dict d;
    d["kind"] = std::string(EventKindName(e.kind));
    d["name"] = std::string(stream.names().Get(e.name));
    d["sub"] = static_cast<int>(e.sub);
    d["ts"] = g_import_ns + static_cast<uint64_t>(static_cast<double>(static_cast<int64_t>(
                                 e.ts - g_import_tsc)) * ns_per_tick);
    d["dur_ns"] = static_cast<uint64_t>(static_cast<double>(e.dur) * ns_per_tick);
    d["step"] = e.kind == EventKind::kStepMarker ? static_cast<int64_t>(e.payload.raw[0]) : -1;
    if (e.kind == EventKind::kCounter) {
      double v;
      __builtin_memcpy(&v, &e.payload.raw[0], sizeof v);
      d["value"] = v;
    }
    d["track"] = tracks[i];
    out.append(std::move(d));
  }
  return out;
}

py::dict DiagnosticsDict() {
  py::dict out;
  const liveprof::Diagnostics& diag = GlobalStream().diagnostics();
  for (size_t i = 0; i < static_cast<size_t>(Diag::kCount); ++i) {
    const Diag d = static_cast<Diag>(i);
    out[py::str(std::string(DiagnosticInfo(d).name))] = diag.Get(d);
  }
  out["ring_dropped"] = GlobalStream().TotalDropped();
  return out;
}

py::dict Status() {
  const SenderStatus s = GlobalSenderStatus();
  py::dict d;
  d["running"] = s.running;
  d["connected"] = s.connected;
  d["events_sent"] = s.events_sent;
  d["batches_sent"] = s.batches_sent;
  d["batches_acked"] = s.batches_acked;
  d["batches_resent"] = s.batches_resent;
  d["batches_dropped"] = s.batches_dropped;
  d["connects"] = s.connects;
  d["last_error"] = s.last_error;
  d["ring_dropped"] = GlobalStream().TotalDropped();
  return d;
}

void Connect(const std::string& address, const std::optional<std::string>& program,
             const std::optional<int32_t>& rank) {
  SenderOptions o;
  o.address = address;
  if (program) o.program = *program;
  if (rank) o.rank = *rank;
  std::string error;
  if (!ConnectGlobalStream(o, &error)) {
    throw std::runtime_error(error);  // names the address.
  }
}

}  // namespace
}  // namespace liveprof

PYBIND11_MODULE(_liveprof, m) {
  using namespace liveprof;
  m.doc() = "liveprof's native module; import liveprof instead (docs/python.md).";

  g_import_tsc = internal::Now();
  g_import_ns = HostNowNs();
  g_names = PyDict_New();
  if (g_names == nullptr) throw py::error_already_set();
  m.add_object("_names", py::reinterpret_steal<py::object>(g_names));  // the module keeps it.
  PyObject* span_type = PyType_FromSpec(&kSpanSpec);
  if (span_type == nullptr) throw py::error_already_set();
  g_span_type = reinterpret_cast<PyTypeObject*>(span_type);
  m.add_object("Span", py::reinterpret_steal<py::object>(span_type));  // the module keeps it.
  if (PyModule_AddFunctions(m.ptr(), kFastFunctions) < 0) throw py::error_already_set();

  // Kinds and stages the Python half uses (stream/event.h's values).
  m.attr("_KIND_HOST_SPAN") = static_cast<int>(EventKind::kHostSpan);
  m.attr("_KIND_INPUT_SPAN") = static_cast<int>(EventKind::kInputSpan);
  m.attr("_STAGES") = py::dict(
      py::arg("unknown") = static_cast<int>(InputStage::kUnknown),
      py::arg("read") = static_cast<int>(InputStage::kRead),
      py::arg("advanced_read") = static_cast<int>(InputStage::kAdvancedRead),
      py::arg("preprocess") = static_cast<int>(InputStage::kPreprocess),
      py::arg("enqueue") = static_cast<int>(InputStage::kEnqueue),
      py::arg("wait") = static_cast<int>(InputStage::kWait));

  m.def("_name_id", [](py::handle name) { return NameIdOrThrow(name); },
        "The interned id of a name (cached per distinct string).");
  m.def("_step_begin", [](int64_t step, NameId name) { StepBegin(step, name); });
  m.def("_step_end", [](int64_t step) { StepEnd(step); });
  m.def("_now", [] { return internal::Now(); }, "Raw host-API timestamp (TSC ticks).");
  m.def("_record_span",
        [](int kind, NameId name, uint64_t begin, uint64_t end, int sub) {
          const EventKind k = static_cast<EventKind>(kind);
          if (k != EventKind::kHostSpan && k != EventKind::kInputSpan) {
            throw py::value_error("liveprof: _record_span takes a host or input span kind");
          }
          if (SpanRecords(k) && begin != 0 && end >= begin) {
            internal::Record(k, name, begin, end - begin, 0, static_cast<uint8_t>(sub), 0, 0);
          }
        },
        "Records a span between two _now() readings (the loader helper).");
  m.def("_record_step",
        [](int64_t step, NameId name, uint64_t begin, uint64_t end) {
          if (internal::Enabled() && begin != 0 && end >= begin) {
            internal::Record(EventKind::kStepMarker, name, begin, end - begin, 0, 0,
                             static_cast<uint64_t>(step), 0);
          }
        },
        "Records training step `step` between two _now() readings (wrap_loader(step=...)).");

  m.def("counter",
        [](py::handle name, double value) { RecordCounter(NameIdOrThrow(name), value); },
        py::arg("name"), py::arg("value"), "Records a sampled value (a counter track).");
  m.def("instant", [](py::handle name) { RecordInstant(NameIdOrThrow(name)); }, py::arg("name"),
        "Records a point in time.");

  m.def("set_level", &SetHostTraceLevel, py::arg("level"),
        "Host trace level: 1 steps, input, counters; 2 also scopes (clamped to 1..2).");
  m.def("level", &HostTraceLevel, "The host trace level (1 or 2).");
  m.def("set_enabled", &SetTracingEnabled, py::arg("enabled"), "Turns all recording on or off.");
  m.def("enabled", &TracingEnabled, "Whether recording is on.");
  m.def("set_python_scopes", &SetPythonScopesEnabled, py::arg("enabled"),
        "Turns liveprof.scope() recording on or off (steps and input are not affected).");
  m.def("python_scopes", &PythonScopesEnabled, "Whether liveprof.scope() records.");

  m.def("connect", &Connect, py::arg("address"), py::arg("program") = py::none(),
        py::arg("rank") = py::none(),
        "Sends this process's events to `liveprof serve --ingest ADDRESS` "
        "(unix:/path or tcp:127.0.0.1:PORT). A server not there yet is retried.");
  m.def("disconnect",
        [](double timeout_s) {
          py::gil_scoped_release release;  // waits for the server's ack.
          // (NaN, negative: no wait; past a year: a year)
          const double ns = std::isnan(timeout_s) ? 0 : std::clamp(timeout_s, 0.0, 3.2e7) * 1e9;
          DisconnectGlobalStream(static_cast<uint64_t>(ns));
        },
        py::arg("timeout") = 2.0, "Sends what is recorded, waits for its ack, and stops.");
  m.def("status", &Status, "The sender's state and counters, as a dict.");
  m.def("_diagnostics", &DiagnosticsDict, "This process's stream diagnostics counters.");
  m.def("_drain_local", &DrainLocal, "Tests only: takes the events recorded so far.");
}
