"""Shape: a step-count-driven loop that pulls batches by hand:
`for step in range(N): x, y = next(it)`, making a new iterator of the same
DataLoader when one runs out (StopIteration), as step-based trainers do.

The job counts its optimizer steps: 50 (over a loader of 16 batches: 3
new iterators after the first).
corpus: steps=50
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

MAX_STEPS = 50


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    x = torch.randn(256, 16)
    y = torch.randint(0, 2, (256,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    it = iter(loader)
    steps = 0
    for step in range(MAX_STEPS):
        try:
            xb, yb = next(it)
        except StopIteration:
            it = iter(loader)
            xb, yb = next(it)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        optimizer.step()
        steps += 1
    print(f"loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
