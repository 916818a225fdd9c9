"""liveprof: annotate a Python training loop for the live profiler.

    import liveprof
    liveprof.connect("unix:/tmp/liveprof.sock")    # `liveprof serve --ingest unix:...`
    for step, (x, y) in enumerate(liveprof.wrap_loader(loader, step=0)):
        with liveprof.scope("forward"):
            loss = model(x).loss(y)
        with liveprof.scope("backward"):
            loss.backward()

What each call records and at which host trace level: docs/python.md. The
hot entry points (scope, counter, instant, levels...) are _native's, over
libliveprof.so's C ABI (ctypes, src/attach); the helpers below are plain
Python on top of its private primitives. Every call records on the calling
thread; nothing here takes a lock or blocks, except disconnect().
"""

import atexit as _atexit
import weakref as _weakref

import sys as _sys

from . import _native as _liveprof
from ._native import (  # noqa: F401  (re-exported)
    counter,
    enabled,
    instant,
    level,
    python_scopes,
    scope,
    set_enabled,
    set_level,
    set_python_scopes,
    status,
)

__all__ = [
    "step", "scope", "input", "counter", "instant", "wrap_loader", "loader",
    "connect", "disconnect", "status", "set_level", "level", "set_enabled", "enabled",
    "set_python_scopes", "python_scopes", "STAGES",
]

#: Input stages for input() and wrap_loader(stage=...), as the analyses read
#: them: every stage counts as Input in the step-time breakdown ("enqueue" as
#: its host-to-device part); the input-pipeline analyzer files "read",
#: "advanced_read", "preprocess" and "enqueue" under their categories,
#: "unknown" by the op's name, and "wait" (the loop waiting for the next
#: batch, TF's IteratorGetNext) as the stall rather than as an input op.
STAGES = tuple(_liveprof._STAGES)


def _annotates():
    # The program marks its own steps or input: liveprof run's automatic
    # PyTorch hooks (_autoattach) stand down, if they were attached.
    auto = _sys.modules.get(__name__ + "._autoattach")
    if auto is not None:
        auto.program_annotates()

_STEP_NAME = "train"



def _stage(stage):
    try:
        return _liveprof._STAGES["unknown" if stage is None else stage]
    except KeyError:
        raise ValueError("liveprof: stage must be one of %s, not %r" % (", ".join(STAGES), stage))


class step:
    """``with liveprof.step(n):`` the body is training step n (TF's step
    marker). Recorded whenever tracing is on (level 1 and 2). A step begun
    while another is open on this thread ends that one first."""

    __slots__ = ("_n", "_name")

    def __init__(self, n, name=_STEP_NAME):
        _annotates()
        self._n = int(n)
        self._name = _liveprof._name_id(name)

    def __enter__(self):
        _liveprof._step_begin(self._n, self._name)
        return self

    def __exit__(self, *exc):
        _liveprof._step_end(self._n)
        return False

    @property
    def number(self):
        return self._n


def input(name="input", stage=None):  # noqa: A001  (the issue's name)
    """``with liveprof.input():`` the data-loading part of a step: counted as
    Input in the step-time breakdown. Recorded at level 1 and 2, whatever
    set_python_scopes says. ``stage``: one of STAGES (default "unknown": the
    input-pipeline analyzer goes by the name)."""
    _annotates()
    return _liveprof._input_span(name, _stage(stage))


class _LoaderIterator:
    __slots__ = ("_it", "_owner", "_step", "_step_t0", "__weakref__")

    def __init__(self, it, owner):
        self._it = it
        self._owner = owner  # the wrap_loader: names, stage, the next step number.
        self._step = 0       # the open step's number,
        self._step_t0 = 0    # and its begin (0: none open).

    def __iter__(self):
        return self

    def __next__(self):
        t0 = _liveprof._now()
        try:
            batch = next(self._it)
        except StopIteration:
            self._end_step(t0)  # the last step ends where the loop asked for more.
            raise
        t1 = _liveprof._now()
        owner = self._owner
        if owner._step is not None:
            # The previous step ends where this one begins: as it asks for its batch.
            self._end_step(t0)
            self._step = owner._step
            self._step_t0 = t0
            owner._step += 1
        _liveprof._record_span(_liveprof._KIND_INPUT_SPAN, owner._name, t0, t1, owner._sub)
        return batch

    def _end_step(self, t):
        if self._step_t0:
            _liveprof._record_step(self._step, self._owner._step_name, self._step_t0, t)
            self._step_t0 = 0

    def close(self):
        """Ends the open step now (a loop left with break does it when its
        iterator goes away, at once in CPython)."""
        self._end_step(_liveprof._now())

    def __del__(self):
        try:
            self.close()
        except Exception:  # at interpreter exit the module may be gone.
            pass


class wrap_loader:
    """Wraps an iterable of batches (a torch DataLoader) so that the time each
    ``next()`` waits for a batch is recorded as input time (a kInputSpan named
    ``name``, stage "wait" by default: the loop waiting for the next batch).

    Batches are passed through unchanged; ``len()`` and other attributes are
    the wrapped one's.

    ``step=None``: steps are yours. The wait counts in the step open on this
    thread when next() is called, so open the step first (see docs/python.md).
    ``step=N``: each batch begins a training step, N, N+1, ...: the step
    begins when the loop asks for its batch (the wait is its input time) and
    ends when the loop asks for the next one, at the end of the data, or when
    the loop is left (as torch.profiler's step()). Iterating the wrapper again
    (the next epoch) goes on numbering. Do not also use liveprof.step() then.
    """

    def __init__(self, iterable, name="DataLoader", step=None, stage="wait"):
        _annotates()
        self._iterable = iterable
        self._name = _liveprof._name_id(name)
        self._sub = _stage(stage)
        self._step = None if step is None else int(step)  # the next step's number.
        self._step_name = _liveprof._name_id(_STEP_NAME)
        self._last = None  # weakref to the newest iterator.

    def __iter__(self):
        last = self._last() if self._last is not None else None
        if last is not None:
            last.close()  # a loop left early: its step ends here at the latest.
        it = _LoaderIterator(iter(self._iterable), self)
        self._last = _weakref.ref(it)
        return it

    def __len__(self):
        return len(self._iterable)

    @property
    def next_step(self):
        """With step=N: the number the next step gets (None: steps are not marked)."""
        return self._step

    def __getattr__(self, attr):  # dataset, batch_size... of the wrapped loader.
        if attr.startswith("__") or attr in wrap_loader.__dict__:
            raise AttributeError(attr)
        return getattr(self.__dict__["_iterable"], attr)


loader = wrap_loader  # the other name docs/python.md mentions.


_connected = False


def connect(address, program=None, rank=None, gpu=False):
    """Sends this process's events to ``liveprof serve --ingest ADDRESS``
    ("unix:/path" or "tcp:127.0.0.1:PORT"). Raises RuntimeError for a bad
    address or a second connect; a server that is not up yet is retried in
    the background. At exit, what is recorded is flushed (disconnect()).

    ``gpu=True``: also traces this process's GPU activity (CUPTI: kernels,
    copies, memory), as ``liveprof run`` does for any CUDA program. Where it
    cannot (no CUPTI, no driver, no GPU) the reason is said once on stderr
    and in ``status()["gpu_message"]``; the program goes on, host events
    still sent. ``gpu`` may also be a level: "default" or "full"."""
    global _connected
    import os
    # (status() first creates the stream, which connects to LIVEPROF_SERVER)
    if os.environ.get("LIVEPROF_SERVER") and _liveprof.status()["running"]:
        # Under `liveprof run` (or LIVEPROF_SERVER): the process already
        # reports to that server; this call changes nothing.
        if not _connected:
            print("liveprof: connect(%r) not needed: this process reports to %s (LIVEPROF_SERVER)"
                  % (address, os.environ["LIVEPROF_SERVER"]), file=_sys.stderr)
        _connected = True
        return
    _liveprof.connect(address, program, rank)
    if not _connected:
        _atexit.register(disconnect)
    _connected = True
    if gpu:
        running, message = _liveprof.gpu_start(None if gpu is True else gpu)
        if not running:
            print("liveprof: GPU activity is not traced: " + message, file=_sys.stderr)


def disconnect(timeout=2.0):
    """Sends what is recorded, waits up to ``timeout`` seconds for the
    server's acknowledgement, and stops the sender. Idempotent."""
    _liveprof.disconnect(timeout)
