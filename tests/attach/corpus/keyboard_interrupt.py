"""Shape: a KeyboardInterrupt in the middle of an epoch (raised by the job
itself after 23 optimizer steps, as a Ctrl-C would); the job prints its
count first and dies of the uncaught KeyboardInterrupt (Python then ends
itself with SIGINT: exit status 130 as a shell reports it).

The job counts its optimizer steps until then: 23.
corpus: steps=23 exit=130
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
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        optimizer.step()
        steps += 1
        if steps == 23:
            print(f"CORPUS steps={steps}", flush=True)
            raise KeyboardInterrupt
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
