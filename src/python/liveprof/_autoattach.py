"""Instruments a Python training job with no change to it (``liveprof run``,
docs/attach.md). The bootstrap (bootstrap/sitecustomize.py) calls attach()
at start-up; nothing happens until the program imports PyTorch, so a Python
process that never does (a launcher, a helper) is left alone. Then:

- **input**: each wait of a DataLoader iterator for its next batch (the
  single- and the multi-process iterator: their base class's ``__next__``)
  is input time, an input span of stage "wait" named as PyTorch's profiler
  names it, ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``;
- **steps**: each ``optimizer.step()`` ends a training step and begins the
  next (PyTorch's global optimizer step hook; on PyTorch 1.x the
  optimizer's step-end entry point), so a step is the time from one
  optimizer step to the next, its batch's wait included. With several
  optimizers, the first one to step marks steps. A program that uses
  ``torch.profiler`` gets its ``ProfilerStep#N`` boundaries instead
  (``profile.step()``), and a program that marks its own steps with
  liveprof (``liveprof.step``, ``wrap_loader``, ``input``) is left to do so:
  from its first such call, nothing here records.

- **modules** (host trace level 3, verbose): each module's forward and
  backward, and on CUDA the memory its forward keeps (_modules.py);
- **loader workers**: each batch a DataLoader fetches (its dataset's
  items and their collation: ``DataLoader fetch#<Dataset class>``) is
  input preprocessing, in the process that fetches it. A worker process
  (``num_workers > 0``, forked: Linux's default) connects as a source of
  its own at its first batch, named after its parent: ``rank 0 · loader
  1`` (``host:pid · loader 1`` without ``RANK``). Its fetches show in the
  input pipeline's host-side breakdown and on its own rows in the trace;
  they are never part of the training process's steps, and it is not a
  column of the Pod page (it has no steps). Workers started with
  ``spawn`` or ``forkserver`` are left alone.

The sender connects to ``LIVEPROF_SERVER`` (set by ``liveprof run``) when
PyTorch is imported, named after the script, with ``RANK`` if set (torchrun).
Every hook costs two clock reads and a record per batch or step; the
overhead is measured in bench/RESULTS.md.
"""

import functools
import importlib.abc
import os
import sys
import weakref

_n = None            # liveprof._native, loaded with torch (not in processes that never import it).
_STAGE_WAIT = None

_attached = False
_on = True           # False once the program annotates itself.
_steps_from = None   # None: no step marked yet; "optimizer" or "profiler".
_step_closer = None  # weakref to the optimizer whose step() ends steps (the first to step).
_step_n = 0
_step_t0 = 0         # the open step's begin (liveprof clock ticks); 0: none open.
_step_name = None
_wait_names = {}     # iterator class -> the name id of its wait.
_train_data = None   # id of the dataset whose batches the marked steps train on (see _on_wait).
_last_data = None    # id of the dataset of the latest wait.
_STAGE_PREPROCESS = None
_fetch_names = {}    # dataset class -> the name id of its fetch.
_pid = None          # the process the hooks were bound in (a forked loader worker is another).
_modules = None      # _modules.ModuleHooks: per-module spans at level 3.


def _program_name():
    argv = getattr(sys, "argv", None) or []
    if argv and argv[0] not in ("", "-c", "-m"):
        return os.path.basename(argv[0])
    if len(argv) > 1 and argv[0] == "-m":
        return argv[1]
    return "python"


def _is_launcher():
    """torchrun (python -m torch.distributed.run / .launch, or the torchrun
    script): its ranks report, each a source of its own; the launcher, which
    imports torch but trains nothing, does not."""
    # sys.orig_argv (3.10+): the interpreter, its options, then -m MODULE or
    # the script. (Before 3.10, at start-up, sys.argv has "-m" without the
    # module: `python -m torch.distributed.run` is not recognised there.)
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable] + list(getattr(sys, "argv", [])))
    if argv and os.path.basename(argv[0]) == "torchrun":
        return True
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-m":
        i += 2 if argv[i] in ("-W", "-X") else 1  # (the interpreter's options; two take a value)
    if i + 1 < len(argv) and argv[i] == "-m":
        return argv[i + 1] in ("torch.distributed.run", "torch.distributed.launch")
    return i < len(argv) and os.path.basename(argv[i]) == "torchrun"


def program_annotates():
    """The program marks its own steps or input (liveprof.step, wrap_loader,
    input): from now on the automatic hooks record nothing."""
    global _on
    _on = False


def _open_step(t):
    global _step_t0
    _step_t0 = t


def _close_step(t):
    global _step_n, _step_t0
    if _step_t0:
        _n._record_step(_step_n, _step_name, _step_t0, t)
        _step_n += 1
    _step_t0 = t  # the next step begins where this one ends.


def _on_wait(it, t0, t1):
    global _step_t0, _last_data
    cls = type(it)
    name = _wait_names.get(cls)
    if name is None:
        name = _wait_names[cls] = _n._name_id("enumerate(DataLoader)#%s.__next__" % cls.__name__)
    data = id(getattr(it, "_dataset", None))
    _last_data = data
    if _steps_from != "profiler":
        if _step_t0 and _train_data is not None and data != _train_data:
            # Another loader (an evaluation between epochs): the open step is
            # not a training step; it is dropped, and this loop's time stays
            # outside steps until the training loader asks for a batch again.
            _step_t0 = 0
        elif _step_t0 == 0 and (_train_data is None or data == _train_data):
            _open_step(t0)  # a step begins as the loop asks for its batch.
    _n._record_span(_n._KIND_INPUT_SPAN, name, t0, t1, _STAGE_WAIT)


_failed = False


def _guarded(hook, *args):
    """Runs a hook; what it raises never reaches the program (said once)."""
    global _failed
    try:
        hook(*args)
    except Exception as e:  # noqa: BLE001
        if not _failed:
            _failed = True
            print("liveprof: a PyTorch hook failed (%s: %s); the job goes on" % (type(e).__name__, e),
                  file=sys.stderr)


def _connect_loader_worker():
    """In a forked DataLoader worker (its first batch): a sender of its
    own, named after the process it serves (the parent's is not in the
    child: its events stay the parent's)."""
    address = os.environ.get("LIVEPROF_SERVER")
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None and hasattr(data, "get_worker_info") else None
    if not address or info is None:
        return  # (a fork of the program's own, not a loader worker: nothing sent)
    try:
        _n.connect(address, program=os.environ.get("LIVEPROF_PROGRAM"), helper="loader %d" % info.id,
                   helper_of=os.getppid())
    except Exception as e:  # noqa: BLE001  (never into the program)
        print("liveprof: DataLoader worker %d not connected: %s" % (info.id, e), file=sys.stderr)
        return
    # A worker ends with os._exit (no atexit): multiprocessing's own exit
    # finalizers send its last batch.
    import multiprocessing.util
    multiprocessing.util.Finalize(None, _n.disconnect, args=(1.0,), exitpriority=0)


def _on_fetch(fetcher, t0, t1):
    global _pid
    pid = os.getpid()
    if pid != _pid:
        _pid = pid
        _connect_loader_worker()
    cls = type(getattr(fetcher, "dataset", None))
    name = _fetch_names.get(cls)
    if name is None:
        name = _fetch_names[cls] = _n._name_id("DataLoader fetch#%s" % cls.__name__)
    _n._record_span(_n._KIND_INPUT_SPAN, name, t0, t1, _STAGE_PREPROCESS)


def _on_optimizer_step(optimizer):
    global _steps_from, _step_closer, _train_data
    if _modules is not None:
        _modules.sync()  # (each step: the level may have changed, capture on demand)
    if not _on or _steps_from == "profiler":
        return
    closer = _step_closer() if _step_closer is not None else None
    if closer is None:  # the first to step, or the one before is gone (a new run in the same process)
        try:
            _step_closer = weakref.ref(optimizer)
        except TypeError:
            _step_closer = lambda: optimizer  # noqa: E731  (not weakly referenceable: kept)
        _steps_from = "optimizer"
    elif optimizer is not closer:
        return
    if _step_t0:
        _train_data = _last_data  # the loader this step trained on: the training loader.
    _close_step(_n._now())


def _on_profiler_step():
    global _steps_from, _step_t0
    if _modules is not None:
        _modules.sync()
    if not _on:
        return
    if _steps_from != "profiler":
        _steps_from = "profiler"  # torch.profiler's steps replace the optimizer's.
        _step_t0 = 0
    _close_step(_n._now())


def _patch_dataloader(torch):
    dl = sys.modules.get("torch.utils.data.dataloader")
    if dl is None or not hasattr(dl, "_BaseDataLoaderIter"):
        return "no torch.utils.data.dataloader._BaseDataLoaderIter"
    original = dl._BaseDataLoaderIter.__next__
    now = _n._now

    @functools.wraps(original)
    def __next__(self):
        if not _on:
            return original(self)
        t0 = now()
        batch = original(self)  # (StopIteration, the end of an epoch, is not a wait)
        _guarded(_on_wait, self, t0, now())
        return batch

    dl._BaseDataLoaderIter.__next__ = __next__
    return None


def _patch_fetchers(torch):
    fetch = sys.modules.get("torch.utils.data._utils.fetch")
    classes = [getattr(fetch, n, None) for n in ("_MapDatasetFetcher", "_IterableDatasetFetcher")] if fetch else []
    if not classes or not all(c is not None and hasattr(c, "fetch") for c in classes):
        return "no DataLoader fetchers (torch.utils.data._utils.fetch)"
    now = _n._now
    for cls in classes:
        def wrap(original):
            @functools.wraps(original)
            def fetch(self, *args, **kwargs):
                if not _on:
                    return original(self, *args, **kwargs)
                t0 = now()
                batch = original(self, *args, **kwargs)  # (StopIteration: the end of the data, no batch)
                _guarded(_on_fetch, self, t0, now())
                return batch
            return fetch
        cls.fetch = wrap(cls.fetch)
    return None


def _patch_optimizer(torch):
    opt = sys.modules.get("torch.optim.optimizer")
    if opt is None:
        return "no torch.optim.optimizer"
    register = getattr(opt, "register_optimizer_step_post_hook", None)
    if register is not None:  # PyTorch 2.x: the documented global hook.
        register(lambda optimizer, args, kwargs: _guarded(_on_optimizer_step, optimizer))
        return None
    Optimizer = getattr(opt, "Optimizer", None)
    original = getattr(Optimizer, "_optimizer_step_code", None)
    if original is None:
        return "no optimizer step hook in this PyTorch (%s)" % getattr(torch, "__version__", "?")

    @functools.wraps(original)
    def _optimizer_step_code(self):  # PyTorch 1.x: called at the end of every step().
        _guarded(_on_optimizer_step, self)
        return original(self)

    Optimizer._optimizer_step_code = _optimizer_step_code
    return None


def _patch_profiler(torch):
    prof = sys.modules.get("torch.profiler.profiler")
    profile = getattr(prof, "profile", None) if prof is not None else None
    if profile is None or not hasattr(profile, "step"):
        return None  # (no torch.profiler: nothing to follow)
    original = profile.step

    @functools.wraps(original)
    def step(self, *args, **kwargs):
        _guarded(_on_profiler_step)
        return original(self, *args, **kwargs)

    profile.step = step
    return None


def _hook_modules(torch):
    global _modules
    from . import _modules as modules
    hooks = modules.ModuleHooks(torch, _n)
    if not hooks.available():
        return "no global module hooks in this PyTorch (%s): no per-module spans" % getattr(torch, "__version__", "?")
    _modules = hooks
    hooks.sync()
    return None


def _bind():
    """Loads the library (the first call makes the stream, which connects to
    LIVEPROF_SERVER) and the ids the hooks use."""
    global _step_name, _n, _STAGE_WAIT, _STAGE_PREPROCESS, _pid
    from . import _native
    _n = _native
    _STAGE_WAIT = _n._STAGES["wait"]
    _STAGE_PREPROCESS = _n._STAGES["preprocess"]
    _pid = os.getpid()
    _step_name = _n._name_id("train")


def _instrument(torch):
    if _n is not None:
        return  # (once: a second import of torch, a reload)
    os.environ.setdefault("LIVEPROF_PROGRAM", _program_name())
    _bind()
    problems = [p for p in (_patch_dataloader(torch), _patch_fetchers(torch), _patch_optimizer(torch),
                            _patch_profiler(torch), _hook_modules(torch)) if p]
    for p in problems:
        print("liveprof: PyTorch partly instrumented: " + p, file=sys.stderr)


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Runs _instrument once `import torch` has finished (torch's __init__
    imports torch.utils.data, torch.optim and torch.profiler). It finds
    torch through the finders after it (a virtual environment's, an
    editable install's), then wraps the loader it got."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        spec = None
        for finder in [f for f in sys.meta_path if f is not self]:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            loader.exec_module = original  # (once)
            original(module)
            try:
                _instrument(module)
            except Exception as e:  # noqa: BLE001  (never into the program)
                print("liveprof: PyTorch not instrumented: %s: %s" % (type(e).__name__, e), file=sys.stderr)

        loader.exec_module = exec_module
        return spec


def _is_multiprocessing_child():
    """A process multiprocessing started with spawn or forkserver (a
    DataLoader worker with that start method): not a training process of its
    own; left alone."""
    argv = list(getattr(sys, "orig_argv", None) or getattr(sys, "argv", None) or [])
    return any("multiprocessing.spawn" in a or "multiprocessing.forkserver" in a or a == "--multiprocessing-fork"
               for a in argv)


def attach():
    """Called by the bootstrap: instruments PyTorch when it is imported."""
    global _attached
    if (_attached or os.environ.get("LIVEPROF_AUTOATTACH", "1") == "0" or _is_launcher()
            or _is_multiprocessing_child()):
        return
    _attached = True
    if "torch" in sys.modules:
        _instrument(sys.modules["torch"])
    else:
        # (It stays in sys.meta_path, answering None for any other name: taking
        # it out while the import system walks the list would skip a finder.)
        sys.meta_path.insert(0, _TorchFinder())
