"""The model's forward as a host op at the default level (``liveprof run``;
_autoattach.py records each backward pass beside it): what a CPU job
computes, named for what it is, instead of a blank between its input
waits.

Which modules are "the model": the ones the program calls from outside
any module (its model, its loss function). They are found in one step
with PyTorch's global forward hooks (every module call goes through them
that step, or for 16 outermost calls at most: about 2 µs each), then those
hooks go and each such module
gets its own forward pre-hook and hook (two calls a step, a few µs), the
rest of the program's modules none. They are looked for again every
``REDISCOVER_STEPS`` steps (a second model trained later).

Each call of such a module is a framework op ``nn.Module.forward: <Class>``
(the step breakdown's host compute, TF stats' host ops, the PyTorch
page's CPU Exec, a span on its thread in the trace); the per-module
breakdown below it is host level 3's (_modules.py, the Modules page).

Only while no GPU is in use in the process (``torch.cuda.is_initialized()``
false at the step's end): on a GPU the host's forward is mostly kernel
launches, which the CUDA injection records as such. Only at host level 2
and above. Never raises into the program: a failing hook turns this off,
said once.
"""

import sys
import threading
import weakref

REDISCOVER_STEPS = 500
LOOK_CALLS = 16  # outermost calls looked at, at most, before the global hooks go
_KIND_FRAMEWORK_OP = 2  # liveprof_record_span's kind for a framework op.


class ModelPasses:
    def __init__(self, torch, native):
        self._torch = torch
        self._n = native
        self._module = sys.modules.get("torch.nn.modules.module")
        self._broken = False
        self._global = None        # the global hooks' handles while looking for the model
        self._found = []           # modules called from outside any module, that step
        self._hooked = weakref.WeakKeyDictionary()  # module -> (pre handle, post handle, name id)
        self._steps = 0            # steps since the model was last looked for
        self._local = threading.local()
        self.active = False        # recording (read by the backward hook: _autoattach.py)

    def available(self):
        m = self._module
        return m is not None and hasattr(m, "register_module_forward_pre_hook") and \
            hasattr(m, "register_module_forward_hook")

    def _wanted(self):
        if self._n._level() < 2:
            return False
        cuda = getattr(self._torch, "cuda", None)
        return not (cuda is not None and cuda.is_initialized())

    def sync(self):
        """At a step boundary (the program's optimizer step)."""
        if self._broken:
            return
        try:
            self.active = self._wanted()
            if not self.active:
                self._stop_looking()
                self._unhook()
                return
            if self._global is not None:
                self._finish_looking()
            elif self._steps >= REDISCOVER_STEPS or not self._hooked:
                self._look()
            self._steps += 1
        except Exception as e:  # noqa: BLE001  (never into the program)
            self._fail(e)

    def hooked(self):
        """The modules whose calls are recorded now (tests)."""
        return list(self._hooked.keys())

    # ---- finding the model ---------------------------------------------------

    def _look(self):
        self._local.depth = 0
        self._found = []
        self._calls = 0
        self._global = (self._module.register_module_forward_pre_hook(self._look_pre),
                        self._module.register_module_forward_hook(self._look_post))

    def _stop_looking(self):
        if self._global is not None:
            for h in self._global:
                h.remove()
            self._global = None

    def _look_pre(self, module, args):
        try:
            depth = getattr(self._local, "depth", 0)
            if depth == 0 and module not in self._hooked:
                if not any(m is module for m in self._found):
                    self._found.append(module)
                self._local.begin = self._n._now()  # (its call is recorded while looking, too)
            self._local.depth = depth + 1
        except Exception as e:  # noqa: BLE001
            self._fail(e)

    def _look_post(self, module, args, output):
        try:
            depth = self._local.depth = max(getattr(self._local, "depth", 1) - 1, 0)
            if depth == 0:
                t = self._n._now()
                begin = getattr(self._local, "begin", 0)
                if begin and module not in self._hooked:
                    self._local.begin = 0
                    self._n._record_span_c(_KIND_FRAMEWORK_OP, self._name_of(module), begin, t, 0)
                self._calls += 1
                if self._calls >= LOOK_CALLS:  # (a loop with no step boundary: an inference loop)
                    self._finish_looking()
                self._n._hook_end(t)
        except Exception as e:  # noqa: BLE001
            self._fail(e)

    def _finish_looking(self):
        self._stop_looking()
        for module in self._found:
            self._hook(module)
        self._found = []
        self._steps = 0

    # ---- recording its calls ---------------------------------------------------

    def _name_of(self, module):
        return self._n._name_id("nn.Module.forward: %s" % type(module).__name__)

    def _hook(self, module):
        if module in self._hooked:
            return
        name = self._name_of(module)
        now, record, hook_end = self._n._now, self._n._record_span_c, self._n._hook_end
        local, fail = self._local, self._fail

        def pre(mod, args):
            try:
                stack = getattr(local, "calls", None)
                if stack is None:
                    stack = local.calls = []
                elif len(stack) >= 64:
                    del stack[:32]  # (calls that raised: never ended)
                stack.append(now())
            except Exception as e:  # noqa: BLE001
                fail(e)

        def post(mod, args, output):  # (measures itself; pre's reading is its last act)
            try:
                stack = getattr(local, "calls", None)
                if stack:
                    t = now()
                    record(_KIND_FRAMEWORK_OP, name, stack.pop(), t, 0)
                    hook_end(t)
            except Exception as e:  # noqa: BLE001
                fail(e)

        self._hooked[module] = (module.register_forward_pre_hook(pre), module.register_forward_hook(post))

    def _unhook(self):
        for handles in list(self._hooked.values()):
            for h in handles:
                h.remove()
        self._hooked = weakref.WeakKeyDictionary()

    def _fail(self, e):
        if self._broken:
            return
        self._broken = True
        self.active = False
        try:
            self._stop_looking()
            self._unhook()
        except Exception:  # noqa: BLE001
            pass
        print("liveprof: the model's forward spans are off: %s: %s" % (type(e).__name__, e), file=sys.stderr)
