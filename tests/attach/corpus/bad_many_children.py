"""Shape (bad input): a job that starts 64 children: a multiprocessing
pool of 64 forked workers (a parallel preprocessing step), then 64 Python
subprocesses at once, before it trains. None of them trains; each must
run and end as it would without liveprof.

The job counts its optimizer steps: 10.
corpus: steps=10
"""
import argparse
import multiprocessing
import subprocess
import sys

import torch
from torch import nn


def square(i):
    return i * i


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    with multiprocessing.get_context("fork").Pool(64) as pool:
        if sum(pool.map(square, range(640))) != sum(i * i for i in range(640)):
            raise SystemExit("the pool's answer is wrong")
    children = [subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(%d %% 7)" % i]) for i in range(64)]
    codes = [c.wait() for c in children]
    if codes != [i % 7 for i in range(64)]:
        raise SystemExit("the subprocesses' statuses: %s" % codes)
    device = torch.device(args.device)
    x, y = torch.randn(160, 16, device=device), torch.randint(0, 2, (160,), device=device)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for i in range(0, 160, 16):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x[i:i + 16]), y[i:i + 16]).backward()
        optimizer.step()
        steps += 1
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
