"""What tracing costs a PyTorch loop of tiny CUDA ops, per op: liveprof
(`liveprof run`, its CUDA injection at the default level) against PyTorch's
own profiler (torch.profiler with CPU and CUDA activities: Kineto over
CUPTI), each against the same loop with no profiler. The target: at
most half of Kineto's added cost per op. Needs a GPU (scripts/gpu-device.sh
runs it).

    python3 bench/gpu_tiny_ops_bench.py [--liveprof build/bin/liveprof] [--rounds 5]

Each mode runs in its own process, alternating, `--rounds` times; the loop is
`--steps` steps of `--ops` in-place adds on a one-element CUDA tensor, each
step ending in a synchronize; a run's figure is its median step's time per
op (the first 5 steps left out).
"""

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

LOOP = r"""
import sys, time, torch
mode, steps, ops, device = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
x = torch.zeros(1, device=device)
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
sync()
def run():
    times = []
    for s in range(steps):
        t0 = time.perf_counter_ns()
        for _ in range(ops):
            x.add_(1.0)
        sync()
        times.append((time.perf_counter_ns() - t0) / ops / 1000.0)
    return times
if mode == "torch":
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as p:
        times = run()
else:
    times = run()
times = sorted(times[5:])
print("us_per_op %.4f" % times[len(times) // 2])
"""


def one(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("us_per_op "):
            return float(line.split()[1])
    raise SystemExit("no figure from %s (exit %d):\n%s\n%s" % (cmd, out.returncode, out.stdout, out.stderr[-2000:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--liveprof", default=os.path.join(HERE, "..", "build", "bin", "liveprof"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--device", default="cuda", help="cuda; cpu for a dry run of the plumbing")
    a = ap.parse_args()
    loop = [a.python, "-c", LOOP]
    args = [str(a.steps), str(a.ops), a.device]
    runs = {"plain": [], "torch.profiler": [], "liveprof run": []}
    for _ in range(a.rounds):
        runs["plain"].append(one(loop + ["plain"] + args))
        runs["torch.profiler"].append(one(loop + ["torch"] + args))
        runs["liveprof run"].append(one([a.liveprof, "run", "--port", "0", "--linger", "0", "--"] + loop + ["plain"] + args))
    med = {k: statistics.median(v) for k, v in runs.items()}
    for k, v in runs.items():
        print("%-15s us/op, median %.3f: %s" % (k, med[k], " ".join("%.3f" % t for t in v)))
    kineto = med["torch.profiler"] - med["plain"]
    ours = med["liveprof run"] - med["plain"]
    ratio = ours / kineto if kineto > 0 else float("inf")
    print("added per op: liveprof %.3f us, torch.profiler (Kineto) %.3f us: ratio %.2f (target <= 0.5): %s"
          % (ours, kineto, ratio, "met" if ratio <= 0.5 else "MISSED"))


if __name__ == "__main__":
    main()
