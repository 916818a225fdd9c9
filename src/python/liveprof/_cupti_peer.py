"""A script that profiles itself keeps working under ``liveprof run``
(docs/attach.md, "A script that profiles itself").

Under ``liveprof run`` CUDA's injection starts liveprof's GPU tracer (CUPTI
activity tracing) in the job at its first cuInit. Many training scripts also
run ``torch.profiler`` (Kineto) themselves. With CUDA 13.2 or older, or
drivers before r610, CUPTI has one set of activity buffer callbacks and one
set of kinds for the whole process: Kineto's ``cuptiActivityRegisterCallbacks``
at its prepare would take every buffer, liveprof's still held by CUPTI
included (Kineto drops those as "unknown buffer"), and its stop disables
kinds. So liveprof steps aside for Kineto's window and takes CUPTI back
after it:

- right before Kineto starts tracing the GPU (``_prepare_profiler``, or
  ``_enable_profiler`` without a prepare, with ``ProfilerActivity.CUDA``
  among the activities), the GPU tracer turns its kinds off, has CUPTI give
  back every record it holds (the device synchronized first when CUDA is
  initialized, so no kernel is half-recorded) and makes no CUPTI call until
  the regain: Kineto's trace is what it would be without liveprof;
- right after Kineto has stopped (``_disable_profiler`` returned: its kinds
  off, its buffers flushed into its trace), the tracer registers its
  callbacks and kinds again. A cuptiFinalize Kineto makes later
  (``TEARDOWN_CUPTI=1``: at the first CUDA call after its stop) is seen by
  the tracer itself, which registers everything once more.

Each handoff is an instant on the process's "GPU tracer (liveprof)" track;
the server shows the windows per process ("GPU data: torch.profiler from t0
to t1", /api/status's gpu_handoffs, the Sources page). liveprof never holds
CUPTI's one subscriber: Kineto's libkineto_init, which calls cuptiSubscribe
once per process, would take a refusal for "no GPU" and trace the CPU only.

The hooks are the three functions of ``torch.autograd.profiler`` through
which every Kineto session of PyTorch 1.13 and 2.x starts and stops
(``torch.profiler.profile`` and ``_KinetoProfile`` through
``torch.autograd.profiler.profile``, whose ``_prepare_trace``,
``_start_trace`` and ``__exit__`` call them as module globals).
``emit_nvtx`` and CPU-only sessions pass through. A trace started from C++
(Kineto's on-demand daemon, KINETO_USE_DAEMON) is not seen here.

Nothing happens in a process without a GPU tracer: the state is asked of
libliveprof.so at each start (under ``liveprof run`` the tracer starts at the
job's first cuInit, often after torch is imported).
"""

import functools
import os
import sys
import threading

CLIENT = "torch.profiler"
_NAMES = ("_prepare_profiler", "_enable_profiler", "_disable_profiler")

_native = None
_torch = None
_lock = threading.Lock()
_aside = False   # this module stepped the tracer aside for the Kineto session in progress.
_said = set()


def _say_once(key, message):
    if key not in _said:
        _said.add(key)
        print("liveprof: " + message, file=sys.stderr, flush=True)


def _traces_gpu(activities):
    """Whether a Kineto session with these activities runs CUPTI."""
    cuda = getattr(getattr(_torch.autograd, "ProfilerActivity", None), "CUDA", None)
    try:
        return cuda is not None and activities is not None and cuda in activities
    except TypeError:
        return False


def _yield(activities):
    """Steps the GPU tracer aside if this session traces the GPU; True if it
    did (the caller regains if the session fails to start)."""
    global _aside
    if not _traces_gpu(activities):
        return False
    with _lock:
        if _aside:
            return False
        state = _native.gpu_state()
        if state == "tracing":
            cuda = getattr(_torch, "cuda", None)
            if cuda is not None and cuda.is_initialized():
                cuda.synchronize()  # (the kernels in flight complete in liveprof's buffers)
        elif state == "none" and not os.environ.get("CUDA_INJECTION64_PATH"):
            return False  # no tracer here, and none will start.
        # "none" under CUDA's injection: the tracer may start inside Kineto's
        # first CUPTI call (cuInit); it then starts aside. "aside" after a
        # refused regain: its retries stop for this window. (Off for good:
        # the library answers 0.)
        _aside = _native.gpu_yield(CLIENT) in (1, 2)
        if _aside and state == "tracing":
            _say_once("yield", "torch.profiler traces the GPU: liveprof's GPU views pause for its window and "
                      "resume when it stops (CUPTI has one client at a time before CUDA 13.3 / driver r610)")
        return _aside


def _regain():
    global _aside
    with _lock:
        if not _aside:
            return
        _aside = False
        code, why = _native.gpu_regain()
    if code == 0:
        _say_once("regain:" + why, "GPU activity is not traced after torch.profiler's window: CUPTI refused (%s); "
                  "liveprof tries again" % why)


def _guarded(f, *args):
    """Runs a hook; an error of liveprof's never reaches the program."""
    try:
        return f(*args)
    except Exception as e:  # noqa: BLE001
        _say_once("error:" + type(e).__name__, "torch.profiler hand-off failed: %s: %s" % (type(e).__name__, e))
        return False


def _wrap(prepare, enable, disable):
    @functools.wraps(prepare)
    def _prepare_profiler(config, activities, *args, **kwargs):
        stepped = _guarded(_yield, activities)
        try:
            return prepare(config, activities, *args, **kwargs)
        except BaseException:
            if stepped:
                _guarded(_regain)
            raise

    @functools.wraps(enable)
    def _enable_profiler(config, activities, *args, **kwargs):
        stepped = _guarded(_yield, activities)  # (after a prepare: aside already, nothing)
        try:
            return enable(config, activities, *args, **kwargs)
        except BaseException:
            if stepped:
                _guarded(_regain)
            raise

    @functools.wraps(disable)
    def _disable_profiler(*args, **kwargs):
        try:
            return disable(*args, **kwargs)
        finally:
            _guarded(_regain)

    return _prepare_profiler, _enable_profiler, _disable_profiler


def install(torch, native):
    """Wraps Kineto's start and stop in ``torch.autograd.profiler`` (and the
    same functions in ``torch.autograd``). Returns None, or what could not be
    done (for the caller to say). Once per process."""
    global _native, _torch
    if getattr(native, "gpu_yield", None) is None or native.gpu_state() is None:
        return "this libliveprof.so cannot step aside for torch.profiler: its GPU trace may be incomplete"
    module = sys.modules.get("torch.autograd.profiler") or getattr(getattr(torch, "autograd", None), "profiler", None)
    originals = [getattr(module, n, None) for n in _NAMES]
    if module is None or not all(callable(f) for f in originals):
        return ("torch.autograd.profiler has no %s: liveprof cannot step aside for torch.profiler "
                "(its GPU trace may be incomplete)" % ", ".join(n for n, f in zip(_NAMES, originals) if not callable(f)))
    if getattr(module, "_liveprof_cupti_peer", False):
        return None
    _native, _torch = native, torch
    wrapped = _wrap(*originals)
    package = getattr(torch, "autograd", None)
    for name, original, w in zip(_NAMES, originals, wrapped):
        setattr(module, name, w)
        if package is not None and getattr(package, name, None) is original:
            setattr(package, name, w)
    module._liveprof_cupti_peer = True
    return None
