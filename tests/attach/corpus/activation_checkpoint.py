"""Shape: activation checkpointing (torch.utils.checkpoint.checkpoint on
the model's middle blocks: their forwards run again during backward).

The job counts its optimizer steps: 30.
corpus: steps=30
"""
import argparse

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(32, 64)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(3))
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = checkpoint(block, h)
        return self.head(h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    x = torch.randn(480, 32)
    y = torch.randint(0, 4, (480,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16)
    model = Net().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
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
