"""The native half of the liveprof package: libliveprof.so's C ABI
(src/attach/liveprof_c.h) through ctypes.

Why ctypes rather than a compiled extension: one build of libliveprof.so
serves every Python 3 (3.9 on), Debian's and a virtual environment's, and
the very same file is what CUDA's injection loads into a job under
`liveprof run`, so a Python process that also runs CUDA has one stream, one
sender and one GPU tracer. The cost, measured by bench/python_scope_bench.py
against the ≤ 1 µs target per ``with liveprof.scope(...)``, is in
bench/RESULTS.md.

The hot calls (a span's begin and end, the clock) go through ``PyDLL``: the
GIL stays held (they never block), and each takes and returns one small
integer, the cheapest call ctypes makes. Calls that wait (disconnect, the
GPU tracer's start and stop) go through ``CDLL``, which releases the GIL.

This module is private: ``import liveprof`` re-exports what users call.
"""

import ctypes as _c
import os as _os

_PATH = _os.environ.get("LIVEPROF_LIBRARY") or _os.path.join(
    _os.path.dirname(_os.path.abspath(__file__)), "libliveprof.so")
try:
    _hot = _c.PyDLL(_PATH)    # GIL held: the non-blocking calls.
    _slow = _c.CDLL(_PATH)    # GIL released: the calls that wait.
except OSError as e:
    raise ImportError("liveprof: cannot load its library %s: %s (build it: cmake --build build "
                      "--target liveprof_python, or pip install .)" % (_PATH, e)) from None

_ABI_VERSION = 1
if _hot.liveprof_abi_version() != _ABI_VERSION:
    raise ImportError("liveprof: %s has C ABI version %d, this package needs %d: mixed installs?"
                      % (_PATH, _hot.liveprof_abi_version(), _ABI_VERSION))


def _fn(lib, name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_u32, _u64, _i64, _int, _dbl, _str, _sz = (
    _c.c_uint32, _c.c_uint64, _c.c_int64, _c.c_int, _c.c_double, _c.c_char_p, _c.c_size_t)

# The hot path: no argtypes (a Python int goes as a C int; names and
# handles are 32-bit), restype int (a handle may come back negative: its
# bits go back unchanged).
_scope_begin = _hot.liveprof_scope_begin
_input_begin = _hot.liveprof_input_begin
_span_end = _hot.liveprof_span_end
# (the same three for liveprof._fast, which calls them from C)
_fast_lib_scope_begin, _fast_lib_input_begin, _fast_lib_span_end = (
    _slow.liveprof_scope_begin, _slow.liveprof_input_begin, _slow.liveprof_span_end)
_now = _fn(_hot, "liveprof_now", _u64)
# liveprof's own hooks (liveprof run's, _autoattach.py) measure their bodies:
# _hook_end(since) adds the time since `since` (a _now() reading) to this
# process's hook time, counts a call, and returns _now() (liveprof._fast's,
# in C, where it imports: replaced at the end; this one converts a 64-bit
# argument, about 0.2 µs). (Absent from an older library: nothing measured.)
_hook_end_lib = _slow.liveprof_hook_end if hasattr(_slow, "liveprof_hook_end") else None
if _hook_end_lib is not None:
    _hook_end = _fn(_hot, "liveprof_hook_end", _u64, _u64)
    _hook_totals_c = _fn(_hot, "liveprof_hook_totals", None, _c.POINTER(_u64), _c.POINTER(_u64), _c.POINTER(_u64))
else:
    def _hook_end(since):
        return _now()
    _hook_totals_c = None
_intern = _fn(_hot, "liveprof_intern", _u32, _c.c_char_p, _sz)

_record_span_c = _fn(_hot, "liveprof_record_span", None, _int, _u32, _u64, _u64, _int)
_record_step_c = _fn(_hot, "liveprof_record_step", None, _i64, _u32, _u64, _u64)
_step_begin_c = _fn(_hot, "liveprof_step_begin", None, _i64, _u32)
_step_end_c = _fn(_hot, "liveprof_step_end", None, _i64)
_counter_c = _fn(_hot, "liveprof_counter", None, _u32, _dbl)
_instant_c = _fn(_hot, "liveprof_instant", None, _u32)
_set_enabled = _fn(_hot, "liveprof_set_enabled", None, _int)
_enabled = _fn(_hot, "liveprof_enabled", _int)
_set_level = _fn(_hot, "liveprof_set_level", None, _int)
_level = _fn(_hot, "liveprof_level", _int)
_set_python_scopes = _fn(_hot, "liveprof_set_python_scopes", None, _int)
_python_scopes = _fn(_hot, "liveprof_python_scopes", _int)
_connect_c = _fn(_slow, "liveprof_connect_helper", _int, _str, _str, _int, _str, _u64, _c.c_char_p, _sz)
_disconnect_c = _fn(_slow, "liveprof_disconnect", None, _u64)
_gpu_start_c = _fn(_slow, "liveprof_gpu_start", _int, _str, _c.c_char_p, _sz)
_gpu_stop_c = _fn(_slow, "liveprof_gpu_stop", None)
# Another CUPTI client (torch.profiler): _cupti_peer.py. (Absent from an
# older library: the package then leaves torch.profiler alone.)
_gpu_yield_c = _fn(_slow, "liveprof_gpu_yield", _int, _str) if hasattr(_slow, "liveprof_gpu_yield") else None
_gpu_regain_c = (_fn(_slow, "liveprof_gpu_regain", _int, _c.c_char_p, _sz)
                 if hasattr(_slow, "liveprof_gpu_regain") else None)
_gpu_state_c = _fn(_slow, "liveprof_gpu_state", _int) if hasattr(_slow, "liveprof_gpu_state") else None
_stage_name = _fn(_hot, "liveprof_input_stage_name", _str, _int)
_kind_name = _fn(_hot, "liveprof_kind_name", _str, _int)
_name_c = _fn(_hot, "liveprof_name", _str, _u32)
_diagnostic_c = _fn(_hot, "liveprof_diagnostic", _str, _int, _c.POINTER(_u64))


class _Status(_c.Structure):
    _fields_ = [
        ("size", _sz), ("running", _int), ("connected", _int),
        ("events_sent", _u64), ("batches_sent", _u64), ("batches_acked", _u64),
        ("batches_resent", _u64), ("batches_dropped", _u64), ("connects", _u64),
        ("events_refused", _u64), ("ring_dropped", _u64),
        ("last_error", _c.c_char * 256), ("gpu_status", _int), ("gpu_message", _c.c_char * 512),
        ("events_recorded", _u64), ("events_delivered", _u64), ("events_resent", _u64),
        ("events_ring_dropped", _u64), ("events_dropped_unacked", _u64), ("events_unsent_at_stop", _u64),
        ("events_lost", _u64),
    ]


class _Event(_c.Structure):
    _fields_ = [
        ("ts_ns", _u64), ("dur_ns", _u64), ("step", _i64), ("value", _dbl),
        ("name", _u32), ("track", _u32), ("kind", _c.c_uint8), ("sub", _c.c_uint8),
    ]


_get_status_c = _fn(_hot, "liveprof_get_status", _int, _c.POINTER(_Status))
_drain_local_c = _fn(_hot, "liveprof_drain_local", _i64, _c.POINTER(_Event), _sz)

#: Input stages by name, as the library numbers them.
_STAGES = {}
for _i in range(16):
    _n = _stage_name(_i)
    if _n is None:
        break
    _STAGES[_n.decode()] = _i
_KIND_HOST_SPAN, _KIND_INPUT_SPAN = 0, 1  # liveprof_record_span's kinds.
_GPU_STATUS = ("idle", "running", "stopped", "no CUPTI", "unavailable", "no privileges", "busy", "failed")

# ---- names -------------------------------------------------------------------

_MAX_CACHED_NAMES = 1 << 16
_names = {}  # str -> id; past _MAX_CACHED_NAMES, new names are interned on every call.


def _name_id_slow(name):
    if not isinstance(name, str):
        raise TypeError("liveprof: a name must be a str, not %s" % type(name).__name__)
    utf8 = name.encode("utf-8")  # lone surrogates raise UnicodeEncodeError.
    i = _intern(utf8, len(utf8))
    if len(_names) < _MAX_CACHED_NAMES:
        _names[name] = i
    return i


def _name_id(name):
    """The interned id of a name (cached per distinct string)."""
    i = _names.get(name) if name.__class__ is str else None
    return i if i is not None else _name_id_slow(name)


# ---- spans -------------------------------------------------------------------

class Span:
    """A span: use it once at a time in a ``with`` statement (liveprof.scope,
    liveprof.input). Whether it records is decided at ``__enter__`` and kept
    until ``__exit__``; its begin lives in the library's table for this
    thread, its handle here, so nesting, recursion and generators suspended
    inside a ``with`` all close the right span. (The pure-Python span; the
    package uses liveprof._fast's, in C, where it imports: see the end.)"""

    __slots__ = ("_name", "_h")

    def __enter__(self):
        if self._h is not None:
            raise RuntimeError("liveprof: this span is already open (one `with` at a time per object)")
        self._h = _scope_begin(self._name)
        return self

    def __exit__(self, t, v, tb):
        h = self._h
        self._h = None
        if h:
            _span_end(h)
        return False  # an exception raised inside the `with` goes on.

    def __repr__(self):
        return "<liveprof.%s %r%s>" % (self._what, _name_text(self._name),
                                       " (open)" if self._h is not None else "")

    _what = "scope"


class _InputSpan(Span):
    __slots__ = ("_sub",)
    _what = "input"

    def __enter__(self):
        if self._h is not None:
            raise RuntimeError("liveprof: this span is already open (one `with` at a time per object)")
        self._h = _input_begin(self._name, self._sub)
        return self


def _new_span(cls, name_id):
    s = cls.__new__(cls)
    s._name = name_id
    s._h = None  # None: not entered; 0: entered, not recording; else the handle.
    return s


def scope(name):
    """scope(name) -> a span for ``with``: a user scope, recorded when tracing
    is on, the host level is 2 and Python scopes are on (checked at
    ``__enter__``)."""
    i = _names.get(name) if name.__class__ is str else None
    return _new_span(Span, i if i is not None else _name_id_slow(name))


def _input_span(name, sub):
    if not isinstance(sub, int) or not 0 <= sub < len(_STAGES):
        raise ValueError("liveprof: input stage %r is not 0..%d" % (sub, len(_STAGES) - 1))
    if _fast is not None:
        return _fast.input_span(_name_id(name), sub)
    s = _new_span(_InputSpan, _name_id(name))
    s._sub = sub
    return s




def _name_text(i):
    t = _name_c(i)
    return t.decode("utf-8", "replace") if t is not None else ""


# ---- steps, samples ------------------------------------------------------------

def _step_begin(step, name):
    _step_begin_c(step, name)


def _step_end(step):
    _step_end_c(step)


def _record_span(kind, name, begin, end, sub):
    """Records a span between two _now() readings (the loader helper)."""
    if kind not in (_KIND_HOST_SPAN, _KIND_INPUT_SPAN):
        raise ValueError("liveprof: _record_span takes a host or input span kind")
    _record_span_c(kind, name, begin, end, sub)


def _record_step(step, name, begin, end):
    """Records training step `step` between two _now() readings."""
    _record_step_c(step, name, begin, end)


def counter(name, value):
    """Records a sampled value (a counter track)."""
    _counter_c(_name_id(name), float(value))


def instant(name):
    """Records a point in time."""
    _instant_c(_name_id(name))


# ---- switches --------------------------------------------------------------------

def set_level(level):
    """Host trace level: 1 steps, input, counters; 2 also scopes (clamped to 1..2)."""
    _set_level(int(level))


def level():
    """The host trace level (1 or 2)."""
    return _level()


def set_enabled(enabled):
    """Turns all recording on or off."""
    _set_enabled(1 if enabled else 0)


def enabled():
    """Whether recording is on."""
    return bool(_enabled())


def set_python_scopes(enabled):
    """Turns liveprof.scope() recording on or off (steps and input are not affected)."""
    _set_python_scopes(1 if enabled else 0)


def python_scopes():
    """Whether liveprof.scope() records."""
    return bool(_python_scopes())


# ---- the sender and the GPU tracer -------------------------------------------

def connect(address, program=None, rank=None, helper=None, helper_of=0):
    """Sends this process's events to `liveprof serve --ingest ADDRESS`
    (unix:/path or tcp:127.0.0.1:PORT). A server not there yet is retried.
    `helper` ("loader 1") and `helper_of` (a pid): this process serves that
    one (a DataLoader worker), and is named after it."""
    if not isinstance(address, str):
        raise TypeError("liveprof.connect: the address must be a str")
    error = _c.create_string_buffer(512)
    if _connect_c(address.encode(), None if program is None else str(program).encode(),
                  -1 if rank is None else int(rank), None if helper is None else str(helper).encode(),
                  int(helper_of), error, len(error)) != 0:
        raise RuntimeError(error.value.decode("utf-8", "replace"))


def disconnect(timeout=2.0):
    """Sends what is recorded, waits for its ack, and stops."""
    t = float(timeout)
    ns = 0 if t != t or t < 0 else int(min(t, 3.2e7) * 1e9)  # (NaN, negative: no wait)
    _disconnect_c(ns)


def gpu_start(level=None):
    """Starts GPU tracing (CUPTI) in this process; returns (running, message)."""
    message = _c.create_string_buffer(1024)
    st = _gpu_start_c(None if level is None else str(level).encode(), message, len(message))
    return st == 1, message.value.decode("utf-8", "replace")


def gpu_stop():
    _gpu_stop_c()


#: liveprof_gpu_state's values, by name.
_GPU_TRACER = ("none", "tracing", "aside", "pending")


def gpu_state():
    """This process's GPU tracer: "none" (not started, failed or stopped),
    "tracing", "aside" (another CUPTI client traces), "pending" (none yet,
    one would start aside); None from a library without it."""
    if _gpu_state_c is None:
        return None
    st = _gpu_state_c()
    return _GPU_TRACER[st] if 0 <= st < len(_GPU_TRACER) else "none"


def gpu_yield(client):
    """Another CUPTI client (`client`, "torch.profiler") is about to trace:
    the GPU tracer steps aside (liveprof_c.h). 1 stepped aside, 2 noted (no
    tracer yet), 0 nothing to do."""
    return _gpu_yield_c(str(client).encode()) if _gpu_yield_c is not None else 0


def gpu_regain():
    """The other client has stopped: (1 tracing again | 2 nothing to take
    back | 0 refused, message: why)."""
    if _gpu_regain_c is None:
        return 2, ""
    message = _c.create_string_buffer(512)
    r = _gpu_regain_c(message, len(message))
    return r, message.value.decode("utf-8", "replace")


def status():
    """The sender's (and the GPU tracer's) state and counters, as a dict."""
    s = _Status()
    s.size = _c.sizeof(_Status)
    _get_status_c(_c.byref(s))
    d = {k: getattr(s, k) for k, _ in _Status._fields_ if k not in ("size", "last_error", "gpu_message")}
    d["running"] = bool(s.running)
    d["connected"] = bool(s.connected)
    d["last_error"] = s.last_error.decode("utf-8", "replace")
    d["gpu"] = _GPU_STATUS[s.gpu_status] if 0 <= s.gpu_status < len(_GPU_STATUS) else str(s.gpu_status)
    d["gpu_message"] = s.gpu_message.decode("utf-8", "replace")
    del d["gpu_status"]
    return d


def _hook_totals():
    """liveprof's hooks in this process: their measured time (ns), their
    calls, and the training steps this process has marked, since it started
    (what its sender sends with liveprof's own cost)."""
    ns, calls, steps = _u64(), _u64(), _u64()
    if _hook_totals_c is not None:
        _hook_totals_c(_c.byref(ns), _c.byref(calls), _c.byref(steps))
    return {"hook_ns": ns.value, "hook_calls": calls.value, "steps": steps.value}


# ---- tests ---------------------------------------------------------------------

def _diagnostics():
    """This process's stream diagnostics counters."""
    out = {}
    v = _u64()
    i = 0
    while True:
        n = _diagnostic_c(i, _c.byref(v))
        if n is None:
            return out
        out[n.decode()] = v.value
        i += 1


def _drain_local():
    """Tests only: takes the events recorded so far, oldest first per thread,
    as dicts (kind, name, sub, ts and dur_ns in host ns, step, value, track)."""
    buf = (_Event * 4096)()
    out = []
    while True:
        n = _drain_local_c(buf, len(buf))
        if n < 0:
            raise RuntimeError("liveprof: _drain_local() while connected: the sender drains")
        for e in buf[:n]:
            kind = _kind_name(e.kind)
            d = {"kind": kind.decode() if kind else str(e.kind), "name": _name_text(e.name), "sub": e.sub,
                 "ts": e.ts_ns, "dur_ns": e.dur_ns, "step": e.step, "track": e.track}
            if d["kind"] == "counter":
                d["value"] = e.value
            out.append(d)
        if n < len(buf):
            return out


# The span object in C (fast_span.c, the stable ABI: any CPython 3.9+), if
# it was built and imports here: scope() is then its. LIVEPROF_PURE_PYTHON=1
# keeps the Python one above (the tests run both).
_fast = None
if _os.environ.get("LIVEPROF_PURE_PYTHON", "") != "1":
    try:
        from . import _fast
    except ImportError:
        _fast = None
if _fast is not None:
    def _address(f):
        return _c.cast(f, _c.c_void_p).value

    _fast.init(_address(_fast_lib_scope_begin), _address(_fast_lib_input_begin), _address(_fast_lib_span_end),
               _names, _name_id_slow, _name_text, _address(_hook_end_lib) if _hook_end_lib is not None else 0)
    Span = _fast.Span  # noqa: F811  (what scope() returns)
    scope = _fast.scope  # noqa: F811
    if _hook_end_lib is not None and hasattr(_fast, "hook_end"):
        _hook_end = _fast.hook_end  # noqa: F811  (one C call, no ctypes conversion)
