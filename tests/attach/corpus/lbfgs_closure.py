"""Shape: optimizer.step(closure) with LBFGS: the closure runs forward and
backward (several times per step, max_iter=4), full-batch, no DataLoader.

The job counts its optimizer.step() calls: 20.
corpus: steps=20
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

    x = torch.linspace(-3, 3, 256, device=device).unsqueeze(1)
    y = torch.sin(x) + 0.05 * torch.randn_like(x)
    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4, history_size=10)
    evaluations = 0

    def closure():
        nonlocal evaluations
        evaluations += 1
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    steps = 0
    for _ in range(20):
        loss = optimizer.step(closure)
        steps += 1
    print(f"loss {loss.item():.5f}, closure calls {evaluations}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
