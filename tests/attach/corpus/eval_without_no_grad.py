"""Shape: train, then evaluate each epoch with model.eval() only: the
evaluation forwards run with autograd on (no torch.no_grad()), but see no
backward and no optimizer step.

The job counts its optimizer steps: 2 epochs x 20 batches = 40.
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

    x = torch.randn(480, 16)
    y = torch.randint(0, 2, (480,))
    train_loader = DataLoader(TensorDataset(x[:320], y[:320]), batch_size=16, shuffle=True)
    eval_loader = DataLoader(TensorDataset(x[320:], y[320:]), batch_size=16)
    model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for epoch in range(2):
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
            loss.backward()
            optimizer.step()
            steps += 1
        model.eval()
        eval_loss = sum(nn.functional.cross_entropy(model(xb.to(device)), yb.to(device)).item()
                        for xb, yb in eval_loader) / len(eval_loader)
        print(f"epoch {epoch}: train {loss.item():.3f} eval {eval_loss:.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
