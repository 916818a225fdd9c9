"""Shape: a DataLoader with pin_memory (True when CUDA is available, as the
usual `pin_memory=torch.cuda.is_available()`) and non_blocking copies.

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

    x = torch.randn(640, 3, 8, 8)
    y = torch.randint(0, 10, (640,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True,
                        pin_memory=device.type == "cuda" and torch.cuda.is_available())
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for xb, yb in loader:
        xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
        steps += 1
    print(f"loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
