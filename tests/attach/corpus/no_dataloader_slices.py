"""Shape: no DataLoader: batches sliced from tensors held in memory
(a shuffled index permutation per epoch).

The job counts its optimizer steps: 2 epochs x 25 batches = 50.
corpus: steps=50
"""
import argparse

import torch
from torch import nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    x = torch.randn(400, 16, device=device)
    y = (x[:, 0] * x[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch_size = 16
    steps = 0
    for epoch in range(2):
        perm = torch.randperm(x.shape[0], device=device)
        for i in range(0, x.shape[0], batch_size):
            idx = perm[i:i + batch_size]
            xb, yb = x[idx], y[idx]
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
