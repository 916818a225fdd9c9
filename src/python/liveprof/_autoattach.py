"""Instruments a Python training job with no change to it (``liveprof run``,
docs/attach.md). The bootstrap (bootstrap/sitecustomize.py) calls attach()
at start-up; nothing happens until the program imports PyTorch, so a Python
process that never does (a launcher, a helper) is left alone. Then:

- **input**: each wait of a DataLoader iterator for its next batch (the
  single- and the multi-process iterator: their base class's ``__next__``)
  is input time, an input span of stage "wait" named as PyTorch's profiler
  names it, ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``;
- **steps**: one iteration of the training loop, ending at its optimizer
  step(s), as the program counts them (_steps.py has the rules): told
  from evaluation by what training does (a backward pass follows its
  batch), never by which loader or dataset fed it. Hooks: the optimizer's
  step (PyTorch's global optimizer step hook; on PyTorch 1.x the
  optimizer's step-end entry point) and ``zero_grad``, AMP's
  ``GradScaler.step`` (a skipped step counts), ``torch.autograd.backward``
  and ``grad``, and ``torch.profiler.profile.step()`` (the boundaries of a
  loop with no optimizer). A program that marks its own steps with
  liveprof (``liveprof.step``, ``wrap_loader``, ``input``) is left to do
  so: from its first such call, nothing here records. Step markers are
  named after their source (``optimizer step``, ``torch.profiler step``),
  which the server shows per process.
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
  ``spawn`` or ``forkserver`` connect the same way.
- **every process of the job**: ranks of ``torch.multiprocessing.spawn``
  (or multiprocessing with spawn or forkserver) hold their connection
  until they show what they are (see _held_server), and are named by
  ``torch.distributed``'s rank once their process group exists.

The sender connects to ``LIVEPROF_SERVER`` (set by ``liveprof run``) when
PyTorch is imported (a multiprocessing child: later, as above), named after
the script, with ``RANK`` if set (torchrun).
Every hook costs two clock reads and a record per batch or step; the
overhead is measured in bench/RESULTS.md. Each hook also measures its own
body, from its first clock reading (after the program's call it wraps,
where it wraps one) to its end, with ``_native._hook_end``, which returns
the clock it reads: the process's hook time and the steps it marked travel
with liveprof's own cost, and the server shows the time the hooks add per
step (docs/attach.md, "What the hooks cost, shown live").
"""

import atexit
import functools
import importlib.abc
import os
import sys

from . import _cupti_peer, _steps

_n = None            # liveprof._native, loaded with torch (not in processes that never import it).
_STAGE_WAIT = None

_attached = False
_on = True           # False once the program annotates itself.
_rule = None         # _steps.StepRule: where steps begin and end.
_step_names = {}     # step source -> the name id of its markers.
_wait_names = {}     # iterator class -> the name id of its wait.
_STAGE_PREPROCESS = None
_fetch_names = {}    # dataset class -> the name id of its fetch.
_modules = None      # _modules.ModuleHooks: per-module spans at level 3.
_passes = None       # _model.ModelPasses: the model's forward (and, here, each backward) as host ops.

# Which process reports, and as what. A process started by multiprocessing
# with spawn or forkserver (a rank of torch.multiprocessing.spawn, a
# DataLoader worker, the forkserver itself) is not known to be anything
# when it imports torch: its connection waits (_held_server keeps the
# address out of the environment, where the library would connect at
# once) until it shows what it is: a loader worker at its first fetch, a
# rank once its process group exists (named by torch.distributed's rank),
# a training process at its first batch or step. A forked process (a
# worker, a rank of start_method="fork") has the parent's state: its
# settling starts afresh (_pid).
_pid = None          # the process whose reporting is settled; another pid: a fork, to settle.
_held_server = None  # the server's address, held back until this process is known.
_rank = None         # torch.distributed's rank, once its process group exists.
_main_pid = None     # the process that imported torch (a fork of it: another pid).


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


def _is_multiprocessing_child():
    """A process multiprocessing started with spawn or forkserver (a rank of
    torch.multiprocessing.spawn, a DataLoader worker with that start method,
    the forkserver): what it is is known only later."""
    argv = list(getattr(sys, "orig_argv", None) or getattr(sys, "argv", None) or [])
    return any("multiprocessing.spawn" in a or "multiprocessing.forkserver" in a or a == "--multiprocessing-fork"
               for a in argv)


def program_annotates():
    """The program marks its own steps or input (liveprof.step, wrap_loader,
    input): from now on the automatic hooks record nothing."""
    global _on
    _on = False


# -- reporting: which process, named how ----------------------------------------

def _say(message):
    print("liveprof: " + message, file=sys.stderr)


def _server_address():
    return os.environ.get("LIVEPROF_SERVER") or _held_server


def _connect(helper=None, helper_of=0):
    """Connects this process's sender (once settled): as a rank when
    torch.distributed has named it, as a loader worker of its parent."""
    global _held_server
    address = _server_address()
    if not address:
        return
    if _held_server is not None:
        os.environ["LIVEPROF_SERVER"] = _held_server  # (its own children report too)
        _held_server = None
    try:
        _n.connect(address, program=os.environ.get("LIVEPROF_PROGRAM"), rank=None if helper else _rank,
                   helper=helper, helper_of=helper_of)
    except Exception as e:  # noqa: BLE001  (never into the program)
        _say("%s not connected: %s" % (helper or "this process", e))
        return
    if os.getpid() != _main_pid:
        # A forked process ends with os._exit (no atexit): multiprocessing's
        # exit finalizers close its last step and send its last batch.
        import multiprocessing.util
        multiprocessing.util.Finalize(None, _finish_forked, exitpriority=0)


def _finish_forked():
    _finish()
    _n.disconnect(1.0)


def _settle():
    """This process shows what it is (a batch, a step, a process group):
    a forked copy starts its own steps; a held connection is made."""
    global _pid, _rule
    pid = os.getpid()
    forked = pid != _pid
    if not forked and _held_server is None:
        return
    _pid = pid
    if forked:
        _rule = _steps.StepRule(_record_step)  # (the parent's steps are the parent's)
    info = _worker_info()
    if info is not None:
        _connect(helper="loader %d" % info.id, helper_of=os.getppid())
    elif forked or _held_server is not None:
        _connect()


def _worker_info():
    data = sys.modules.get("torch.utils.data")
    get = getattr(data, "get_worker_info", None) if data is not None else None
    return get() if get is not None else None


def _check_process():
    if _pid != os.getpid() or _held_server is not None:
        _settle()


# -- steps ---------------------------------------------------------------------

def _record_step(n, t0, t1):
    name = _step_names.get(_rule.source)
    if name is None:
        name = _step_names[_rule.source] = _n._name_id("%s step" % _rule.source)
    _n._record_step(n, name, t0, t1)


def _finish():
    """The program ends: its last step, if still open, is closed."""
    try:
        if _on and _rule is not None and _pid == os.getpid():
            _rule.finish()
    except Exception:  # noqa: BLE001
        pass


def _on_wait(it, t0, t1):
    _check_process()
    cls = type(it)
    name = _wait_names.get(cls)
    if name is None:
        name = _wait_names[cls] = _n._name_id("enumerate(DataLoader)#%s.__next__" % cls.__name__)
    _rule.wait(t0)
    _n._record_span(_n._KIND_INPUT_SPAN, name, t0, t1, _STAGE_WAIT)
    _n._hook_end(t1)  # (this hook's time: from the batch's arrival)


def _on_backward():
    t = _n._now()
    _rule.backward(t)
    _n._hook_end(t)


def _on_zero_grad():
    t = _n._now()
    _rule.zero_grad(t)
    _n._hook_end(t)


_opt_steps = 0  # optimizer steps seen: a GradScaler step that skipped its optimizer adds none.


def _sync_hooks():
    if _modules is not None:
        _modules.sync()  # (each step: the level may have changed, capture on demand)
    if _passes is not None:
        _passes.sync()


def _on_optimizer_step(optimizer):
    global _opt_steps
    t = _n._now()  # (the step ends here: the optimizer has stepped)
    _opt_steps += 1
    _sync_hooks()
    if _on:
        _check_process()
        _rule.optimizer_step(id(optimizer), t)
    _n._hook_end(t)


def _on_profiler_step():
    t = _n._now()
    _sync_hooks()
    if _on:
        _check_process()
        _rule.profiler_step(t)
    _n._hook_end(t)


def _on_process_group():
    """torch.distributed's process group exists: this process is that rank."""
    global _rank
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_initialized():
        return
    _rank = dist.get_rank()
    _check_process()


_failed = False


def _guarded(hook, *args):
    """Runs a hook; what it raises never reaches the program (said once)."""
    global _failed
    try:
        hook(*args)
    except Exception as e:  # noqa: BLE001
        if not _failed:
            _failed = True
            _say("a PyTorch hook failed (%s: %s); the job goes on" % (type(e).__name__, e))


def _on_fetch(fetcher, t0, t1):
    if _pid != os.getpid() or _held_server is not None:
        _settle()
    cls = type(getattr(fetcher, "dataset", None))
    name = _fetch_names.get(cls)
    if name is None:
        name = _fetch_names[cls] = _n._name_id("DataLoader fetch#%s" % cls.__name__)
    _n._record_span(_n._KIND_INPUT_SPAN, name, t0, t1, _STAGE_PREPROCESS)
    _n._hook_end(t1)


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
    Optimizer = getattr(opt, "Optimizer", None) if opt is not None else None
    if Optimizer is None:
        return "no torch.optim.optimizer"
    zero_grad = Optimizer.zero_grad  # (the optimizers of torch.optim do not override it)

    @functools.wraps(zero_grad)
    def _zero_grad(self, *args, **kwargs):
        if _on:
            _guarded(_on_zero_grad)
        return zero_grad(self, *args, **kwargs)

    Optimizer.zero_grad = _zero_grad
    register = getattr(opt, "register_optimizer_step_post_hook", None)
    if register is not None:  # PyTorch 2.x: the documented global hook.
        register(lambda optimizer, args, kwargs: _guarded(_on_optimizer_step, optimizer))
        return None
    original = getattr(Optimizer, "_optimizer_step_code", None)
    if original is None:
        return "no optimizer step hook in this PyTorch (%s)" % getattr(torch, "__version__", "?")

    @functools.wraps(original)
    def _optimizer_step_code(self):  # PyTorch 1.x: called at the end of every step().
        _guarded(_on_optimizer_step, self)
        return original(self)

    Optimizer._optimizer_step_code = _optimizer_step_code
    return None


def _patch_grad_scaler(torch):
    """AMP's GradScaler.step skips its optimizer's step on inf/NaN gradients:
    the program counts that iteration all the same, and so do its steps."""
    classes = []
    for name in ("torch.amp.grad_scaler", "torch.cuda.amp.grad_scaler"):
        module = sys.modules.get(name)
        cls = getattr(module, "GradScaler", None) if module is not None else None
        if cls is not None and "step" in cls.__dict__:
            classes.append(cls)  # (each class that defines its own step)
    for cls in classes:
        def wrap(original):
            @functools.wraps(original)
            def step(self, optimizer, *args, **kwargs):
                before = _opt_steps
                out = original(self, optimizer, *args, **kwargs)
                if _opt_steps == before:  # skipped: no optimizer.step() ran
                    _guarded(_on_optimizer_step, optimizer)
                return out
            return step
        cls.step = wrap(cls.step)
    return None


def _patch_autograd(torch):
    """A backward pass: the batch is trained on (an evaluation's is not).
    Tensor.backward() calls torch.autograd.backward."""
    autograd = sys.modules.get("torch.autograd")
    if autograd is None or not hasattr(autograd, "backward"):
        return "no torch.autograd.backward: evaluation loops are not told apart"
    now = _n._now
    for name in ("backward", "grad"):
        original = getattr(autograd, name, None)
        if original is None:
            continue

        def wrap(original, span):
            @functools.wraps(original)
            def call(*args, **kwargs):
                if not _on:
                    return original(*args, **kwargs)
                _guarded(_on_backward)
                if _passes is None or not _passes.active:
                    return original(*args, **kwargs)
                t0 = now()  # (a CPU job's backward pass: a host op beside the model's forward)
                try:
                    return original(*args, **kwargs)
                finally:
                    t1 = now()
                    _n._record_span_c(2, span, t0, t1, 0)  # (kind 2: a framework op)
                    _n._hook_end(t1)
            return call
        setattr(autograd, name, wrap(original, _n._name_id("autograd." + name)))
    return None


def _patch_distributed(torch):
    """A rank is named by torch.distributed's rank once its process group
    exists (RANK may be absent: torch.multiprocessing.spawn)."""
    dist = sys.modules.get("torch.distributed")
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    original = getattr(c10d, "init_process_group", None) if c10d is not None else None
    if original is None:
        return None  # (a PyTorch built without distributed)

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        out = original(*args, **kwargs)
        _guarded(_on_process_group)
        return out

    c10d.init_process_group = init_process_group
    if dist is not None and getattr(dist, "init_process_group", None) is original:
        dist.init_process_group = init_process_group
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


def _hook_model(torch):
    global _passes
    from . import _model
    passes = _model.ModelPasses(torch, _n)
    if not passes.available():
        return "no global module hooks in this PyTorch (%s): no forward spans" % getattr(torch, "__version__", "?")
    _passes = passes
    passes.sync()
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
    LIVEPROF_SERVER, unless a multiprocessing child holds it back) and the
    ids the hooks use."""
    global _n, _STAGE_WAIT, _STAGE_PREPROCESS, _pid, _held_server, _rule, _main_pid
    if _is_multiprocessing_child() and os.environ.get("LIVEPROF_SERVER"):
        _held_server = os.environ.pop("LIVEPROF_SERVER")
    from . import _native
    _n = _native
    _STAGE_WAIT = _n._STAGES["wait"]
    _STAGE_PREPROCESS = _n._STAGES["preprocess"]
    _pid = _main_pid = os.getpid()
    _rule = _steps.StepRule(_record_step)


def _instrument(torch):
    if _n is not None:
        return  # (once: a second import of torch, a reload)
    os.environ.setdefault("LIVEPROF_PROGRAM", _program_name())
    _bind()
    atexit.register(_finish)  # (before the library's own exit flush: Python's atexit runs first)
    problems = [p for p in (_patch_dataloader(torch), _patch_fetchers(torch), _patch_optimizer(torch),
                            _patch_grad_scaler(torch), _patch_autograd(torch), _patch_distributed(torch),
                            _patch_profiler(torch), _hook_modules(torch), _hook_model(torch),
                            _cupti_peer.install(torch, _n)) if p]
    for p in problems:
        _say("PyTorch partly instrumented: " + p)


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


def attach():
    """Called by the bootstrap: instruments PyTorch when it is imported."""
    global _attached
    if _attached or os.environ.get("LIVEPROF_AUTOATTACH", "1") == "0" or _is_launcher():
        return
    _attached = True
    if "torch" in sys.modules:
        _instrument(sys.modules["torch"])
    else:
        # (It stays in sys.meta_path, answering None for any other name: taking
        # it out while the import system walks the list would skip a finder.)
        sys.meta_path.insert(0, _TorchFinder())
