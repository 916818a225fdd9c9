"""Shape: an LR scheduler stepped after each optimizer step (OneCycleLR),
with gradient clipping (clip_grad_norm_) before each step.

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

    x = torch.randn(320, 24)
    y = torch.randint(0, 5, (320,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, drop_last=True)
    model = nn.Sequential(nn.Linear(24, 48), nn.ReLU(), nn.Dropout(0.1), nn.Linear(48, 5)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    epochs = 2
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.2, total_steps=epochs * len(loader))
    steps = 0
    for epoch in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()
            steps += 1
        print(f"epoch {epoch}: loss {loss.item():.3f} lr {scheduler.get_last_lr()[0]:.4f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
