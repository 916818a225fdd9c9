"""Shape: a DataLoader with num_workers=2 and persistent_workers=True (the
same worker processes serve every epoch), 3 epochs.

The job counts its optimizer steps: 3 epochs x 12 batches = 36.
corpus: steps=36
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self):
        return 192

    def __getitem__(self, i):
        x = torch.full((6,), float(i % 17) / 17.0) + 0.01 * torch.arange(6.0)
        return x, x.pow(2).sum().unsqueeze(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    loader = DataLoader(Squares(), batch_size=16, shuffle=True, num_workers=2, persistent_workers=True)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    steps = 0
    for epoch in range(3):
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(xb.to(device)), yb.to(device))
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
