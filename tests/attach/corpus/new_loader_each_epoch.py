"""Shape: a new DataLoader (and a new dataset) built for each epoch.

The job counts its optimizer steps: 3 epochs x 20 batches = 60.
corpus: steps=60
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_dataset(epoch, n=320):
    g = torch.Generator().manual_seed(epoch)
    x = torch.randn(n, 16, generator=g)
    y = (x.sum(dim=1) > 0).long()
    return TensorDataset(x, y)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    steps = 0
    for epoch in range(3):
        loader = DataLoader(make_dataset(epoch), batch_size=16, shuffle=True)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
