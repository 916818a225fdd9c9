"""Shape: one DataLoader, built once, iterated for several epochs.

The job counts its optimizer steps: 2 epochs x 40 batches = 80.
corpus: steps=80
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
    y = x @ torch.randn(20, 1) + 0.1 * torch.randn(640, 1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    steps = 0
    for epoch in range(2):
        model.train()
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
