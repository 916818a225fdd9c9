"""Shape (bad input): a job that forks without exec mid-training: a child
that evaluates the model on its copy (forward only, no step) and ends with
os._exit(7), which the parent waits for and checks, as a hand-rolled
evaluator or checkpoint writer would.

The job counts its optimizer steps: 12 (the parent's; the child makes none).
corpus: steps=12
"""
import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    loader = DataLoader(TensorDataset(torch.randn(192, 16), torch.randint(0, 2, (192,))), batch_size=16)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        steps += 1
        if steps == 6:
            pid = os.fork()  # (CPU only: CUDA does not survive a fork)
            if pid == 0:
                with torch.no_grad():
                    model(torch.randn(64, 16)).sum().item()
                os._exit(7)
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) != 7:
                raise SystemExit("the forked child ended with %r, not 7" % status)
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
