"""Shape: a script that profiles itself: torch.profiler with a schedule
(wait 9, warmup 1, active 10: steps 10-19 traced) over a 40-step
training loop, `prof.step()` at the end of each iteration, its trace
exported at the end. Under liveprof run, the script's own trace must stay
complete: it checks it itself (every active step's ProfilerStep#N, and on
CUDA the kernels of every active step) and fails if not.

The job counts its optimizer steps: 40.
corpus: steps=40
"""
import argparse
import json
import os
import tempfile

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, TensorDataset

ACTIVE = range(10, 20)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)
    loader = DataLoader(TensorDataset(torch.randn(640, 64), torch.randint(0, 4, (640,))), batch_size=16)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    traces = []
    steps = 0
    with profile(activities=activities, schedule=schedule(wait=9, warmup=1, active=len(ACTIVE), repeat=1),
                 on_trace_ready=traces.append) as prof:
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            steps += 1
            prof.step()
    if len(traces) != 1:
        raise SystemExit("torch.profiler's trace was handed over %d times, not once" % len(traces))
    with tempfile.TemporaryDirectory() as d:
        prof.export_chrome_trace(os.path.join(d, "trace.json"))
        with open(os.path.join(d, "trace.json")) as f:
            trace = json.load(f)
    trace = trace["traceEvents"] if isinstance(trace, dict) else trace  # (a bare list in PyTorch 1.x)
    profiled = sorted({int(e["name"].split("#")[1]) for e in trace
                       if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")})
    # (its numbering of the window differs between versions: 9-18 in 1.13)
    if len(profiled) != len(ACTIVE) or profiled != list(range(profiled[0], profiled[0] + len(ACTIVE))):
        raise SystemExit("torch.profiler's own steps: %s, not %d in a row" % (profiled, len(ACTIVE)))
    if args.device == "cuda":
        kernels = [e for e in trace if e.get("ph") == "X" and e.get("cat") == "kernel"]
        # three GEMMs a step at least (two forward, their backward): every active step's kernels
        if len(kernels) < 3 * len(ACTIVE):
            raise SystemExit("torch.profiler's trace has %d kernels for %d steps" % (len(kernels), len(ACTIVE)))
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
