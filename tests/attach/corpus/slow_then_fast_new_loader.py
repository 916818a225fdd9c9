"""Shape: a new DataLoader (and dataset) for each
epoch, the first epoch's input slow (40 ms to make each of its 30
batches), the next two epochs' fast (25 batches each); the model's step
computes in about 5 ms. The input_bound_high alert should fire in epoch 0
and resolve in epochs 1-2.

The job counts its optimizer steps: 30 + 25 + 25 = 80.
corpus: steps=80 alert=input_bound_high
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class EpochBatches(Dataset):
    """Item i is batch i (64 samples): the loader uses batch_size=None."""

    def __init__(self, epoch, batches, delay_s):
        self.epoch, self.batches, self.delay_s = epoch, batches, delay_s

    def __len__(self):
        return self.batches

    def __getitem__(self, i):
        time.sleep(self.delay_s)
        g = torch.Generator().manual_seed(1000 * self.epoch + i)
        return torch.randn(64, 256, generator=g), torch.randint(0, 10, (64,), generator=g)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    model = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    steps = 0
    for epoch in range(3):
        dataset = EpochBatches(epoch, 30, 0.040) if epoch == 0 else EpochBatches(epoch, 25, 0.0)
        loader = DataLoader(dataset, batch_size=None, shuffle=True)
        t0 = time.perf_counter()
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            steps += 1
        print(f"epoch {epoch}: {(time.perf_counter() - t0) * 1e3 / len(dataset):.1f} ms/step, loss {loss.item():.3f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
