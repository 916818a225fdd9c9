"""Shape: a custom batch iterator: a plain Python generator function that
yields (inputs, targets) batches; no DataLoader.

The job counts its optimizer steps: 40.
corpus: steps=40
"""
import argparse

import torch
from torch import nn


def batches(n_batches, batch_size, seed=0):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n_batches):
        x = torch.randn(batch_size, 12, generator=g)
        yield x, x.pow(2).sum(dim=1, keepdim=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    steps = 0
    for x, y in batches(40, 16):
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        steps += 1
    print(f"loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
