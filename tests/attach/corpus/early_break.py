"""Shape: an early `break` out of each epoch (a step budget per epoch: the
DataLoader iterator is abandoned part way), 2 epochs.

The job counts its optimizer steps: 2 epochs x 25 (of 40) batches = 50.
corpus: steps=50
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

STEPS_PER_EPOCH = 25


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
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for epoch in range(2):
        for i, (xb, yb) in enumerate(loader):
            if i == STEPS_PER_EPOCH:
                break
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
