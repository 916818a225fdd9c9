"""Shape: two models trained alternately from one DataLoader: even batches
train model A with optimizer A, odd batches model B with optimizer B.

The job counts its optimizer steps, both optimizers together: 40 batches,
40 steps (20 each).
corpus: steps=40
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

    x = torch.randn(640, 12)
    y = torch.randint(0, 3, (640,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model_a = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 3)).to(device)
    model_b = nn.Sequential(nn.Linear(12, 48), nn.Tanh(), nn.Linear(48, 3)).to(device)
    opt_a = torch.optim.SGD(model_a.parameters(), lr=0.05)
    opt_b = torch.optim.Adam(model_b.parameters(), lr=1e-3)
    steps = 0
    for i, (xb, yb) in enumerate(loader):
        model, opt = (model_a, opt_a) if i % 2 == 0 else (model_b, opt_b)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        opt.step()
        steps += 1
    print(f"last loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
