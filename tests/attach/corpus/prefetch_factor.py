"""Shape: a DataLoader with num_workers=2 and prefetch_factor=4 (each
worker keeps 4 batches in flight), one epoch.

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

    x = torch.randn(640, 20)
    y = torch.randint(0, 4, (640,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, num_workers=2, prefetch_factor=4)
    model = nn.Sequential(nn.Linear(20, 40), nn.ReLU(), nn.Linear(40, 4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, nesterov=True, momentum=0.9)
    steps = 0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        optimizer.step()
        steps += 1
    print(f"loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
