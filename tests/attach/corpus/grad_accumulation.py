"""Shape: gradient accumulation: backward on every micro-batch, one
optimizer step every 4 micro-batches (loss scaled by 1/4).

The job counts its optimizer steps: 80 micro-batches / 4 = 20.
corpus: steps=20
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ACCUM = 4


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    x = torch.randn(640, 32)
    y = torch.randint(0, 3, (640,))
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 3)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    steps = 0
    optimizer.zero_grad()
    for i, (xb, yb) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device)) / ACCUM
        loss.backward()
        if (i + 1) % ACCUM == 0:
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
    print(f"micro-batches {i + 1}, loss {loss.item() * ACCUM:.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
