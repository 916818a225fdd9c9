"""Shape: validation every N steps in the middle of an epoch (a validation
DataLoader under torch.no_grad(), every 10 optimizer steps), then training
goes on with the same training iterator.

The job counts its optimizer steps: 2 epochs x 25 batches = 50.
corpus: steps=50
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VAL_EVERY = 10


def evaluate(model, loader, device):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for xb, yb in loader:
            total += nn.functional.mse_loss(model(xb.to(device)), yb.to(device), reduction="sum").item()
    model.train()
    return total / len(loader.dataset)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    x = torch.randn(500, 10)
    y = torch.sin(x[:, :1]) + x[:, 1:2]
    train_loader = DataLoader(TensorDataset(x[:400], y[:400]), batch_size=16, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[400:], y[400:]), batch_size=25)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    steps = 0
    for epoch in range(2):
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(xb.to(device)), yb.to(device))
            loss.backward()
            optimizer.step()
            steps += 1
            if steps % VAL_EVERY == 0:
                print(f"step {steps}: train {loss.item():.4f} val {evaluate(model, val_loader, device):.4f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
