"""Shape: a custom batch iterator class (__iter__ / __next__, raising
StopIteration at the end of each epoch), reused for 2 epochs; no DataLoader.

The job counts its optimizer steps: 2 epochs x 20 batches = 40.
corpus: steps=40
"""
import argparse

import torch
from torch import nn


class BatchIterator:
    def __init__(self, x, y, batch_size):
        self.x, self.y, self.batch_size = x, y, batch_size
        self.pos = 0

    def __iter__(self):
        self.pos = 0
        self.order = torch.randperm(len(self.x))
        return self

    def __next__(self):
        if self.pos >= len(self.x):
            raise StopIteration
        idx = self.order[self.pos:self.pos + self.batch_size]
        self.pos += self.batch_size
        return self.x[idx], self.y[idx]

    def __len__(self):
        return (len(self.x) + self.batch_size - 1) // self.batch_size


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    x = torch.randn(320, 8)
    y = torch.randint(0, 2, (320,))
    data = BatchIterator(x, y, 16)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
    steps = 0
    for epoch in range(2):
        for xb, yb in data:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
