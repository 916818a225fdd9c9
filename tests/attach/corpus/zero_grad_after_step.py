"""Shape: zero_grad(set_to_none=True) after optimizer.step() rather than
before backward (the gradients are cleared at the end of each step).

The job counts its optimizer steps: 40.
corpus: steps=40
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    x = torch.randn(640, 16)
    y = torch.randint(0, 2, (640,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    steps = 0
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        steps += 1
    print(f"loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
