"""Shape: a fixed number of steps per epoch taken with
itertools.islice(loader, K) (the iterator is dropped part way each epoch),
3 epochs.

The job counts its optimizer steps: 3 epochs x 15 (of 40) batches = 45.
corpus: steps=45
"""
import argparse
import itertools

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
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for epoch in range(3):
        for xb, yb in itertools.islice(loader, 15):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
