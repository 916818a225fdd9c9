"""Shape: the DataLoader wrapped in a progress-bar-like generator (as
`for batch in tqdm(loader)` does: a wrapper that yields the loader's
batches and reports every few), 2 epochs.

The job counts its optimizer steps: 2 epochs x 20 batches = 40.
corpus: steps=40
"""
import argparse
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def progress(iterable, desc, every=10):
    start = time.perf_counter()
    total = len(iterable)
    for i, item in enumerate(iterable, 1):
        yield item
        if i % every == 0 or i == total:
            sys.stderr.write(f"\r{desc}: {i}/{total} [{time.perf_counter() - start:.1f}s]")
    sys.stderr.write("\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    x = torch.randn(320, 16)
    y = torch.randint(0, 2, (320,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for epoch in range(2):
        for xb, yb in progress(loader, f"epoch {epoch}"):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
            loss.backward()
            optimizer.step()
            steps += 1
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
