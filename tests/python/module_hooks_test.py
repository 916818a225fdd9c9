"""liveprof run's per-module spans (liveprof/_modules.py) on a real PyTorch
CPU model: installed only at host trace level 3 and removed below it (at
the next optimizer step), forward spans nested as the modules are,
backward spans where their end can be observed, gradients unchanged (an
in-place ReLU included), a forward that raises leaves nothing open. The
events are read back from the process's own rings. No server.
"""

import os
import sys
import unittest

os.environ.pop("LIVEPROF_SERVER", None)
os.environ.pop("LIVEPROF_HOST_LEVEL", None)

import torch  # noqa: E402

from liveprof import _autoattach as auto  # noqa: E402
from liveprof import _native as n  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(inplace=True),
                                        torch.nn.Linear(16, 4))

    def forward(self, x):
        return self.body(x)


class Broken(torch.nn.Module):
    def forward(self, x):
        raise ValueError("broken on purpose")


def spans(evs):
    return [(e["name"], e["ts"], e["ts"] + e["dur_ns"]) for e in evs
            if e["kind"] == "host_span" and e["name"].startswith("nn.Module")]


def train_step(model, opt, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(32, 8)
    loss = model(x).square().mean()
    n.instant("test: backward begins")
    loss.backward()
    n.instant("test: backward ends")
    grads = [p.grad.clone() for p in model.parameters()]
    opt.step()
    opt.zero_grad()
    return grads


class ModuleHooksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        n.set_enabled(True)
        n.set_level(2)
        auto._instrument(torch)
        if auto._modules is None:
            raise AssertionError("no module hooks on PyTorch %s" % torch.__version__)

    def setUp(self):
        n.set_level(2)
        n.set_python_scopes(True)
        auto._modules.sync()
        n._drain_local()

    def model(self):
        torch.manual_seed(1)
        model = Net()
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    def test_level_2_records_no_module_and_level_3_each_forward_and_backward(self):
        model, opt = self.model()
        train_step(model, opt)
        self.assertFalse(auto._modules.installed())
        self.assertEqual(spans(n._drain_local()), [])

        n.set_level(3)
        train_step(model, opt)  # its optimizer step installs the hooks: the next step has them.
        self.assertTrue(auto._modules.installed())
        n._drain_local()
        h0 = n._hook_totals()
        train_step(model, opt)
        h1 = n._hook_totals()
        evs = n._drain_local()
        got = spans(evs)
        (b0,) = [e["ts"] for e in evs if e["name"] == "test: backward begins"]
        (b1,) = [e["ts"] for e in evs if e["name"] == "test: backward ends"]
        by_name = {}
        for name, t0, t1 in got:
            by_name.setdefault(name, []).append((t0, t1))
        forward = ["nn.Module: Net", "nn.Module: Net.body (Sequential)", "nn.Module: Net.body.0 (Linear)",
                   "nn.Module: Net.body.1 (ReLU)", "nn.Module: Net.body.2 (Linear)"]
        # Net and the Sequential take data (no gradient) and have no
        # parameters of their own, the in-place ReLU's input is its output:
        # no backward end to observe.
        backward = ["nn.Module: Net.body.0 (Linear).backward", "nn.Module: Net.body.2 (Linear).backward"]
        self.assertEqual(sorted(by_name), sorted(forward + backward))
        self.assertTrue(all(len(v) == 1 for v in by_name.values()), by_name)
        (net,), (body,) = by_name[forward[0]], by_name[forward[1]]
        for child in forward[2:]:  # nested as the modules are
            (c,) = by_name[child]
            self.assertTrue(body[0] <= c[0] and c[1] <= body[1], (child, c, body))
        self.assertTrue(net[0] <= body[0] and body[1] <= net[1])
        (fc0,), (fc2,) = by_name[forward[2]], by_name[forward[4]]
        self.assertLess(fc0[1], fc2[0])
        for name in backward:  # inside loss.backward(), after every forward
            (b,) = by_name[name]
            self.assertTrue(b0 <= b[0] <= b[1] <= b1 and b[0] >= net[1], (name, b, (b0, b1)))
        # The last layer's backward ends before the first one's does.
        self.assertLess(by_name[backward[1]][0][1], by_name[backward[0]][0][1])
        # No CUDA here: no memory counters.
        self.assertFalse([e for e in n._drain_local() if e["name"].startswith("nn.Module memory")])

        n.set_level(2)
        train_step(model, opt)  # its optimizer step removes them.
        self.assertFalse(auto._modules.installed())
        n._drain_local()
        h2 = n._hook_totals()
        train_step(model, opt)
        h3 = n._hook_totals()
        self.assertEqual(spans(n._drain_local()), [])
        # The module hooks measure themselves (the process's hook time):
        # at least a forward's two (pre and post) for each of the 5 modules
        # more than at level 2, and a step each.
        calls = [b["hook_calls"] - a["hook_calls"] for a, b in ((h0, h1), (h2, h3))]
        self.assertGreaterEqual(calls[0] - calls[1], 10, calls)
        self.assertGreater(h1["hook_ns"], h0["hook_ns"])
        self.assertEqual([h1["steps"] - h0["steps"], h3["steps"] - h2["steps"]], [1, 1])

    def test_the_hooks_change_no_gradient(self):
        plain, opt = self.model()
        before = [train_step(plain, opt, seed=s) for s in range(3)]
        n.set_level(3)
        auto._modules.sync()
        hooked, opt = self.model()
        after = [train_step(hooked, opt, seed=s) for s in range(3)]
        self.assertTrue(auto._modules.installed())
        for g0, g1 in zip(before, after):
            for a, b in zip(g0, g1):
                self.assertTrue(torch.equal(a, b))

    def test_a_forward_that_raises_leaves_no_span_open(self):
        n.set_level(3)
        auto._modules.sync()
        broken = Broken()
        with self.assertRaises(ValueError):
            broken(torch.zeros(1))
        model, opt = self.model()
        train_step(model, opt)  # (its optimizer step ends the step: what raised is forgotten)
        self.assertEqual(getattr(auto._modules._local, "stack", []), [])
        train_step(model, opt)
        got = [name for name, _, _ in spans(n._drain_local())]
        self.assertNotIn("nn.Module: Broken", got)
        self.assertEqual(got.count("nn.Module: Net"), 2)
        self.assertEqual(got.count("nn.Module: Net.body.2 (Linear).backward"), 2)

    def test_a_module_called_twice_and_a_leaf_input(self):
        # One Linear applied twice (shared weights) to a leaf made once with
        # requires_grad: a forward and a backward per call, and no hook left
        # on the leaf or piling up on the parameter, step after step.
        class Twice(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(torch.tanh(self.fc(x)))

        n.set_level(3)
        auto._modules.sync()
        torch.manual_seed(3)
        model, x = Twice(), torch.randn(2, 4, requires_grad=True)
        for _ in range(3):
            model(x).sum().backward()
        got = [name for name, _, _ in spans(n._drain_local())]
        self.assertEqual(got.count("nn.Module: Twice.fc (Linear)"), 6)
        self.assertEqual(got.count("nn.Module: Twice.fc (Linear).backward"), 6)
        self.assertEqual(len(x._backward_hooks or {}), 0)  # (the leaf: never hooked)
        self.assertEqual(len(model.fc.weight._backward_hooks or {}), 1)  # (once per module)
        n.set_level(2)
        auto._modules.sync()  # the hooks go, the parameter's with them
        self.assertEqual(len(model.fc.weight._backward_hooks or {}), 0)

    def test_a_hook_that_fails_inside_backward_stays_out_of_the_program(self):
        n.set_level(3)
        auto._modules.sync()
        model, opt = self.model()
        real = auto._modules._n

        armed = []

        class Failing:  # the clock fails once the forward is over: inside the backward's hooks.
            def __getattr__(self, name):
                if name == "_now" and armed:
                    def fail():
                        raise RuntimeError("a failure on purpose")
                    return fail
                return getattr(real, name)

        auto._modules._n = Failing()
        try:
            loss = model(torch.randn(4, 8)).sum()
            self.assertTrue(auto._modules.installed())
            armed.append(True)
            loss.backward()  # (raises nothing)
            self.assertTrue(auto._modules._broken)
            self.assertFalse(auto._modules.installed())
            self.assertIsNotNone(model.body[0].weight.grad)
        finally:
            auto._modules._n = real
            auto._modules._broken = False

    def test_on_cuda_the_memory_each_forward_keeps(self):
        # A stand-in for torch.cuda (none here): allocated bytes that each
        # module's forward adds to. The real global hooks and modules.
        class Cuda:
            allocated = 0

            def is_available(self):
                return True

            def is_initialized(self):
                return True

            def memory_allocated(self):
                return Cuda.allocated

        class Torch:
            cuda = Cuda()
            is_grad_enabled = staticmethod(torch.is_grad_enabled)

        class Grow(torch.nn.Module):
            def __init__(self, k):
                super().__init__()
                self.k = k

            def forward(self, x):
                Cuda.allocated += 1000 * self.k
                return x

        from liveprof import _modules
        n.set_level(3)
        hooks = _modules.ModuleHooks(Torch, n)
        hooks.sync()
        try:
            model = torch.nn.Sequential(Grow(1), Grow(2))
            with torch.no_grad():
                model(torch.zeros(1))
                model(torch.zeros(1))
        finally:
            hooks._remove()
        got = [(e["name"], e["value"]) for e in n._drain_local() if e["kind"] == "counter"]
        self.assertEqual(got, [("nn.Module memory: Sequential.0 (Grow)", 1000.0),
                               ("nn.Module memory: Sequential.1 (Grow)", 2000.0),
                               ("nn.Module memory: Sequential", 3000.0)] * 2)

    def test_python_scopes_off_turns_them_off(self):
        n.set_level(3)
        n.set_python_scopes(False)
        auto._modules.sync()
        self.assertFalse(auto._modules.installed())


if __name__ == "__main__":
    unittest.main(verbosity=2)
