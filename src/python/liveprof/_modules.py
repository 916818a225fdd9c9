"""Each PyTorch module's forward and backward, and on CUDA the memory its
forward keeps, at host trace level 3 ("verbose", as TF's host_tracer_level
3; ``LIVEPROF_HOST_LEVEL=3`` or capture on demand). Used by _autoattach
(``liveprof run``): what users of PyTorch's module view or traceml get, live.

The hooks cost the program (Python calls per module call, and PyTorch's
slower module path while any global hook exists), so they exist only while
the level is 3: ``sync()``, called at every step boundary, installs or
removes them (the parameters' hooks too). Then, per module call:

- **forward**: a host span ``nn.Module: <path>``, from PyTorch's global
  forward pre-hook to its forward hook, where the path is the module's
  place in the first module called around it (``Net.encoder.0 (Linear)``;
  the outermost is its class, ``Net``). Nested modules nest, so the Modules
  view (aggregators/pytorch/module_stats.h) has each one's self time. The step
  breakdown and the op table leave these spans out.
- **backward**: a host span ``nn.Module: <path>.backward``, from the moment
  the gradient of its output reaches it to the moment the gradients of its
  inputs and of its own parameters are computed (tensor hooks on its
  output and inputs, and one on its first parameter: its parameters'
  gradients come from one node), on the thread that runs that part of the
  backward (the caller's on CPU, the device's autograd thread on CUDA).
  What has no observable end records no backward: a module whose inputs
  need no gradient and that has no parameters of its own (a model fed with
  data, a container of it), an in-place module (its input is its output).
  Leaf tensors (a parameter passed as an argument) are not hooked: their
  hooks would stay. A module called several times in a step (shared
  weights) ends each call's backward when its parameters' gradient, summed
  over the calls, is computed, or, for a call whose inputs are hooked, when
  their gradients are; an input shared by several modules ends their
  backwards when its summed gradient is; activation checkpointing's
  recomputed forwards count as calls.
- **memory** (CUDA, once the program has initialised it): a counter
  ``nn.Module memory: <path>``, the bytes allocated on the current device
  that its forward left allocated (``torch.cuda.memory_allocated()`` after
  less before: its activations and outputs).

Tensor hooks do not change the autograd graph (PyTorch's full backward
hooks do, and break modules followed by an in-place op), and none of this
ever raises into the program: a hook that fails turns the hooks off and
says why once on stderr.
"""

import sys
import threading
import weakref


class ModuleHooks:
    def __init__(self, torch, native):
        self._torch = torch
        self._n = native
        self._module = sys.modules.get("torch.nn.modules.module")
        self._handles = None
        self._broken = False
        self._names = weakref.WeakKeyDictionary()  # module -> _Names
        self._paths = weakref.WeakKeyDictionary()  # module -> its path, set by its parent's first call
        self._open = {}  # id(module) -> [open backward states, oldest first] (cleared at each step)
        self._param_handles = []  # the parameters' hooks (removed with the others)
        self._local = threading.local()
        self._cuda_memory = None

    def available(self):
        m = self._module
        return m is not None and hasattr(m, "register_module_forward_pre_hook") and \
            hasattr(m, "register_module_forward_hook")

    def sync(self):
        """At a step boundary: hooks on while the level is 3, off else."""
        if self._broken:
            return
        on = self._n._level() >= 3 and self._n._python_scopes() != 0
        if on and self._handles is None and self.available():
            self._handles = (self._module.register_module_forward_pre_hook(self._pre),
                             self._module.register_module_forward_hook(self._post))
        elif not on and self._handles is not None:
            self._remove()
        if self._handles is not None and self._cuda_memory is None:
            # (CUDA's memory once the program has initialised it: a job that
            # moves its model to the GPU after PyTorch's import, as most do)
            cuda = getattr(self._torch, "cuda", None)
            try:
                if cuda is not None and cuda.is_available() and cuda.is_initialized():
                    self._cuda_memory = cuda.memory_allocated
            except Exception:  # noqa: BLE001
                self._cuda_memory = None
        self._open.clear()  # (a backward that never ended: its step is over)
        # (Forwards that raised never ended: none is running at a step's end.)
        stack = getattr(self._local, "stack", None)
        if stack:
            del stack[:]

    def installed(self):
        return self._handles is not None

    def _remove(self):
        for h in list(self._handles or ()) + self._param_handles:
            h.remove()
        self._handles = None
        self._param_handles = []
        for names in list(self._names.values()):
            names.param = None  # (hooked again when the hooks come back)

    def _fail(self, e):
        if self._broken:
            return  # (said once: the hooks of this backward may still fire)
        self._broken = True
        try:
            self._remove()
        except Exception:  # noqa: BLE001
            pass
        print("liveprof: PyTorch module hooks off: %s: %s" % (type(e).__name__, e), file=sys.stderr)

    # ---- names ------------------------------------------------------------------

    def _names_of(self, module):
        names = self._names.get(module)
        if names is not None:
            return names
        path = self._paths.get(module)
        label = type(module).__name__ if path is None else "%s (%s)" % (path, type(module).__name__)
        path = path or type(module).__name__
        for child_name, child in module.named_children():
            if child not in self._paths:
                self._paths[child] = path + "." + child_name
        name_id = self._n._name_id
        names = _Names(name_id("nn.Module: " + label), name_id("nn.Module: %s.backward" % label),
                       name_id("nn.Module memory: " + label))
        self._names[module] = names
        return names

    # ---- forward ----------------------------------------------------------------

    # Each hook measures its body (_native._hook_end): _pre from its start
    # (the module's forward begins where that reading ends), _post and the
    # backward's from the clock reading they take.
    def _pre(self, module, args):
        try:
            t = self._n._now()
            stack = getattr(self._local, "stack", None)
            if stack is None:
                stack = self._local.stack = []
            elif len(stack) >= 256:
                del stack[:128]  # (forwards that raised, in a process with no step to clear them: a loader worker)
            names = self._names_of(module)
            before = self._cuda_memory() if self._cuda_memory is not None else None
            stack.append((module, names, self._n._hook_end(t), before, args))
        except Exception as e:  # noqa: BLE001  (never into the program)
            self._fail(e)

    def _post(self, module, args, output):
        end = 0
        try:
            end = self._n._now()
            stack = getattr(self._local, "stack", None)
            # Its entry; any above it are of forwards that raised (never ended).
            while stack:
                entry = stack.pop()
                if entry[0] is module:
                    break
            else:
                return
            _, names, begin, before, inputs = entry
            n = self._n
            n._record_span_c(n._KIND_HOST_SPAN, names.forward, begin, end, 0)
            if before is not None and self._cuda_memory is not None:
                n._counter_c(names.memory, float(self._cuda_memory() - before))
            if self._torch.is_grad_enabled():
                self._watch_backward(module, names, inputs, output)
        except Exception as e:  # noqa: BLE001
            self._fail(e)
        finally:
            if end:
                self._n._hook_end(end)

    # ---- backward ---------------------------------------------------------------
    # Everything below runs inside the program's loss.backward(), called by
    # the autograd engine: guarded like the forward hooks.

    def _watch_backward(self, module, names, inputs, output):
        # Leaves are left out: a leaf's hooks stay for the rest of the run (a
        # parameter passed as an argument, an input made once with
        # requires_grad), so hooks would pile up at every call; and an input
        # that is also an output (an in-place module) marks no end.
        outs = [t for t in _tensors(output) if t.requires_grad and not t.is_leaf]
        if not outs:
            return
        ins = [t for t in _tensors(inputs)
               if t.requires_grad and not t.is_leaf and not any(t is o for o in outs)]
        param = self._has_param(module, names)
        if not ins and not param:
            return  # (no end to observe)
        state = _Backward(names.backward, len(ins), param)
        key = id(module)
        opened = self._open.setdefault(key, [])
        if len(opened) >= 64:
            del opened[0]  # (calls whose backward never ran: bounded)
        opened.append(state)
        begin = self._begin_backward
        for t in outs:
            t.register_hook(lambda grad, s=state: begin(s))
        done = self._input_done
        for t in ins:
            t.register_hook(lambda grad, s=state, k=key: done(s, k))

    def _has_param(self, module, names):
        """Whether the module has parameters of its own that need a gradient
        (they are computed together, by the node of the op that used them:
        one hook, on the first, registered once, says when)."""
        if names.param is None:
            first = next((p for p in module.parameters(recurse=False) if p.requires_grad), None)
            names.param = first is not None
            if first is not None:
                ref = weakref.ref(module)
                self._param_handles.append(first.register_hook(lambda grad, r=ref: self._param_done(r)))
        return names.param

    def _begin_backward(self, state):
        try:
            if state.begin == 0:
                state.begin = self._n._now()
        except Exception as e:  # noqa: BLE001
            self._fail(e)

    def _input_done(self, state, key):
        try:
            state.inputs -= 1
            if state.inputs == 0:
                t = state.inputs_end = self._n._now()
                if not state.param:
                    self._end_backward(state, key, t)
                self._n._hook_end(t)
        except Exception as e:  # noqa: BLE001
            self._fail(e)

    def _param_done(self, ref):
        # A parameter's gradient is computed once per backward, summed over
        # the module's calls, after the last call's backward (backward runs
        # the calls newest first). With one call open it ends that call.
        # With several (shared weights), each call whose inputs' gradients
        # came ends there; one with no hooked input ends now.
        try:
            module = ref()
            opened = self._open.get(id(module)) if module is not None and self._handles is not None else None
            if not opened:
                return
            now = self._n._now()
            several = len(opened) > 1
            for state in list(opened):
                if not state.param:
                    continue
                state.param = False
                if state.inputs == 0:
                    ends = state.inputs_end if several and state.inputs_end else now
                    self._end_backward(state, id(module), ends)
            self._n._hook_end(now)
        except Exception as e:  # noqa: BLE001
            self._fail(e)

    def _end_backward(self, state, key, end):
        opened = self._open.get(key)
        if opened and state in opened:
            opened.remove(state)
        if state.begin:
            n = self._n
            n._record_span_c(n._KIND_HOST_SPAN, state.name, state.begin, max(end, state.begin), 0)


class _Names:
    """A module's span names, and whether it has parameters of its own
    (None: not looked at yet)."""
    __slots__ = ("forward", "backward", "memory", "param")

    def __init__(self, forward, backward, memory):
        self.forward, self.backward, self.memory, self.param = forward, backward, memory, None


class _Backward:
    """One call's backward: the inputs whose gradients it still waits for
    (and when the last came: 0 not yet), whether its parameters' too, and
    when it began (0: not yet)."""
    __slots__ = ("name", "inputs", "inputs_end", "param", "begin")

    def __init__(self, name, inputs, param):
        self.name, self.inputs, self.inputs_end, self.param, self.begin = name, inputs, 0, param, 0


def _tensors(value):
    """The tensors in a module's arguments or output (a tensor, or a tuple,
    list or dict of them, one level deep)."""
    if hasattr(value, "register_hook") and hasattr(value, "requires_grad"):
        return (value,)
    if isinstance(value, dict):
        value = value.values()
    if isinstance(value, (tuple, list, type({}.values()))):
        return tuple(v for v in value if hasattr(v, "register_hook") and hasattr(v, "requires_grad"))
    return ()
