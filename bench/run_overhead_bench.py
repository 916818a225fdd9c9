"""What `liveprof run`'s Python bootstrap costs a training step (target:
<= 1 % of step time at the default level on the CPU example): the loader,
fetch and optimizer hooks.

Runs examples/pytorch_plain.py (fast loader) under `liveprof run` with the
PyTorch hooks on and off (LIVEPROF_AUTOATTACH=0: the same server, the same
process tree, only the hooks differ), alternating, and without liveprof at
all; prints each run's mean step time and the medians.

    /usr/bin/python3 bench/run_overhead_bench.py [--liveprof build/bin/liveprof] [--pairs 7] [--steps 400]

Then, at level 3 (no target: the level that costs, turned on for a while),
the per-module hooks' cost on the example's CNN, in-process.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def mean_step_ms(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    m = re.search(r"mean step time ([\d.]+) ms", out)
    if not m:
        raise SystemExit("no step time in the output of %s:\n%s" % (cmd, out))
    return float(m.group(1))


HOOK_COST = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from liveprof import _autoattach as a, _native as n
class It: pass
class Opt: pass
class Data: pass
class Fetcher:
    dataset = Data()
opt, fetcher = Opt(), Fetcher()
a._bind()
# The step rule's hooks (session 44: zero_grad and backward; a package
# before them has neither, and the same loop measures what it had).
zero_grad = getattr(a, "_on_zero_grad", None)
backward = getattr(a, "_on_backward", None)
N = 20000
best = 1e9
for r in range(7):
    t = time.perf_counter_ns()
    for i in range(N):
        t0 = n._now()                  # the wrapped fetcher: two clock reads,
        a._guarded(a._on_fetch, fetcher, t0, n._now())  # the batch's fetch recorded,
        t0 = n._now()                  # the wrapped DataLoader __next__: two clock reads,
        a._guarded(a._on_wait, It, t0, n._now())   # the wait recorded,
        if zero_grad is not None:
            a._guarded(zero_grad)                  # the optimizer's zero_grad,
            a._guarded(backward)                   # the backward pass,
        a._guarded(a._on_optimizer_step, opt)      # and the optimizer's step-end hook: a step recorded.
        if i % 1000 == 999:
            n._drain_local()           # (not connected: the bench drains its own rings)
    best = min(best, (time.perf_counter_ns() - t) / N)
print("%.0f" % best)
"""


# Level 3 (verbose): the per-module hooks (liveprof/_modules.py), in-process.
# Their cost per module call (its forward, its backward) from a 32-layer
# MLP on a 1x4 input, where the layers' own work is small: the fastest of
# 400 training steps with the hooks on and off, alternating blocks, the
# difference over 32 layers; then that cost against the example's CNN's
# step (its module calls a step x the cost; its median step at level 2).
MODULE_COST = r"""
import statistics, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import torch
from liveprof import _autoattach as a, _native as n
from pytorch_job import SmallCnn
torch.set_num_threads(1)
a._instrument(torch)
torch.manual_seed(0)
def trainer(model, x, y, loss_fn):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    def step():
        loss = loss_fn(model(x), y)
        loss.backward(); opt.step(); opt.zero_grad()
    return step
layers = 32
mlp = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(layers)])
tiny = trainer(mlp, torch.randn(1, 4), torch.randn(1, 4), torch.nn.functional.mse_loss)
cnn = trainer(SmallCnn(), torch.randn(32, 3, 32, 32), torch.randint(0, 3, (32,)), torch.nn.functional.cross_entropy)
def timed(step, level, n_steps, out):
    n.set_level(level); a._modules.sync()  # (as an optimizer step does)
    assert a._modules.installed() == (level == 3)
    step()
    for i in range(n_steps):
        t = time.perf_counter_ns(); step(); out.append(time.perf_counter_ns() - t)
    n._drain_local()
fast = {2: [], 3: []}
for block in range(int(sys.argv[3])):
    for level in (2, 3):
        timed(tiny, level, 20, fast[level])
per_call = (min(fast[3]) - min(fast[2])) / layers
cnn_steps = []
timed(cnn, 2, 20, cnn_steps)
n.set_level(3); a._modules.sync(); cnn(); n._drain_local(); cnn()
spans = sum(1 for e in n._drain_local() if e["name"].startswith("nn.Module: "))
calls = sum(1 for _ in SmallCnn().modules())
print(per_call, min(fast[2]), min(fast[3]), statistics.median(cnn_steps), calls, spans)
"""


# The default level's model passes (liveprof/_model.py): a
# CPU job's forward (its outermost modules' own forward hooks) and backward
# (autograd.backward's wrapper) as ops. Their cost, each measured alone
# (a whole step's difference is below this machine's noise): an Identity
# module's call with and without the hooks, a one-op backward with and
# without its span, best of 7 rounds each.
PASS_COST = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import torch
from liveprof import _autoattach as a, _native as n
torch.set_num_threads(1)
a._instrument(torch)
n.set_level(2)
a._passes.active = True
ident = torch.nn.Identity()
x = torch.zeros(1)
w = torch.zeros(1, requires_grad=True)
N = 20000
def forward_ns(hooked):
    a._passes._unhook()
    if hooked:
        a._passes._hook(ident)
    t = time.perf_counter_ns()
    for _ in range(N):
        ident(x)
    return (time.perf_counter_ns() - t) / N
def backward_ns(active):
    a._passes.active = active
    t = time.perf_counter_ns()
    for _ in range(N // 4):
        (w * 2).sum().backward()
    return (time.perf_counter_ns() - t) / (N // 4)
f = {True: 1e18, False: 1e18}
b = {True: 1e18, False: 1e18}
for r in range(7):
    for on in (True, False):
        f[on] = min(f[on], forward_ns(on))
        b[on] = min(b[on], backward_ns(on))
    n._drain_local()
print(f[True] - f[False], b[True] - b[False], f[False], b[False])
"""


def pass_cost_ns(python_dir):
    out = subprocess.run(["/usr/bin/python3", "-c", PASS_COST, python_dir], capture_output=True, text=True,
                         check=True).stdout.split()
    return [float(v) for v in out]


def module_cost(python_dir, blocks):
    out = subprocess.run(["/usr/bin/python3", "-c", MODULE_COST, python_dir, os.path.join(HERE, "..", "examples"),
                          str(blocks)], capture_output=True, text=True, check=True).stdout.split()
    return [float(v) for v in out]


def hook_cost_ns(python_dir):
    out = subprocess.run(["/usr/bin/python3", "-c", HOOK_COST, python_dir], capture_output=True, text=True,
                         check=True).stdout
    return float(out.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--liveprof", default=os.path.join(HERE, "..", "build", "bin", "liveprof"))
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--blocks", type=int, default=10, help="level 3's alternating blocks of 20 steps")
    a = ap.parse_args()
    job = ["/usr/bin/python3", os.path.join(HERE, "..", "examples", "pytorch_plain.py"),
           "--steps", str(a.steps), "--loader-delay-ms", "0", "--quiet"]
    run = [a.liveprof, "run", "--port", "0", "--linger", "0", "--"] + job
    results = {"hooks on": [], "hooks off": [], "no liveprof": []}
    for i in range(a.pairs):
        for name, cmd, extra in (("hooks on", run, {}), ("hooks off", run, {"LIVEPROF_AUTOATTACH": "0"}),
                                 ("no liveprof", job, {})):
            env = dict(os.environ, **extra)
            results[name].append(mean_step_ms(cmd, env))
        print("pair %d: %s" % (i + 1, ", ".join("%s %.3f" % (k, v[-1]) for k, v in results.items())), flush=True)
    on, off, bare = (statistics.median(results[k]) for k in ("hooks on", "hooks off", "no liveprof"))
    cost = hook_cost_ns(os.path.join(os.path.dirname(a.liveprof), "..", "python"))
    print("the hooks' own cost per step (a batch's fetch and wait, zero_grad, backward and an optimizer step; best of "
          "7 x 20,000): %.0f ns "
          "= %.4f %% of a %.3f ms step" % (cost, 100 * cost / (off * 1e6), off))
    print("median mean step time: hooks on %.3f ms, hooks off %.3f ms, no liveprof %.3f ms" % (on, off, bare))
    print("the hooks' cost: %+.2f %% of step time (target <= 1 %%); liveprof run's whole: %+.2f %%"
          % (100 * (on - off) / off, 100 * (on - bare) / bare))
    fwd, bwd, fwd_bare, bwd_bare = pass_cost_ns(os.path.join(os.path.dirname(a.liveprof), "..", "python"))
    print("the model's forward and backward as ops (default level, a CPU job): a hooked outermost module's call "
          "+%.2f us (an Identity's call %.2f us bare), a backward pass +%.2f us (a one-op backward %.2f us bare): "
          "a step with a model and a loss module, %.1f us = %.3f %% of a 10 ms step"
          % (fwd / 1e3, fwd_bare / 1e3, bwd / 1e3, bwd_bare / 1e3, (2 * fwd + bwd) / 1e3, (2 * fwd + bwd) / 1e5))
    per_call, tiny_off, tiny_on, cnn_ms, calls, spans = module_cost(
        os.path.join(os.path.dirname(a.liveprof), "..", "python"), a.blocks)
    print("level 3, the per-module hooks: %.1f us per module call, forward and backward (a 32-layer MLP's "
          "fastest step %.0f us at level 2, %.0f us at level 3); the example's CNN: %d module calls a step "
          "(%d spans), %.3f ms a step at level 2: %.2f %%"
          % (per_call / 1e3, tiny_off / 1e3, tiny_on / 1e3, calls, spans, cnn_ms / 1e6,
             100 * calls * per_call / cnn_ms))


if __name__ == "__main__":
    sys.exit(main())
