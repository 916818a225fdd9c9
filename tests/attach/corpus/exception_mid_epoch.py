"""Shape: an exception raised in the middle of an epoch (a bad batch after
17 optimizer steps); the job prints its count in a `finally` and dies of
the uncaught exception (exit status 1).

The job counts its optimizer steps until then: 17.
corpus: steps=17 exit=1
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

    x = torch.randn(640, 16)
    y = torch.randint(0, 2, (640,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    try:
        for epoch in range(2):
            for xb, yb in loader:
                if steps == 17:
                    raise RuntimeError(f"bad batch at step {steps}: loss is NaN")
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
                loss.backward()
                optimizer.step()
                steps += 1
    finally:
        print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
