"""Shape: a DataLoader with num_workers=2 started with the 'spawn'
multiprocessing context (multiprocessing_context="spawn": each worker is a
fresh interpreter that imports this script as a module, hence the
__main__ guard and a module-level Dataset).

The job counts its optimizer steps: 30.
corpus: steps=30
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Noisy(Dataset):
    def __len__(self):
        return 480

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(10, generator=g)
        return x, (x[0] > 0).long()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    loader = DataLoader(Noisy(), batch_size=16, shuffle=True, num_workers=2, multiprocessing_context="spawn")
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = 0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        optimizer.step()
        steps += 1
    print(f"loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
