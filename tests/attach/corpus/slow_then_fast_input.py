"""Shape: an input-bound phase, then a fast one: one DataLoader whose
dataset takes 40 ms to make each of the first 30 batches (slow storage or
decoding), then none; the model's step computes in about 5 ms. The
input_bound_high alert should fire in the slow phase and resolve in the
fast one.

The job counts its optimizer steps: 30 slow + 40 fast = 70.
corpus: steps=70 alert=input_bound_high
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SLOW_BATCHES, FAST_BATCHES, DELAY_S = 30, 40, 0.040


class SlowThenFastBatches(Dataset):
    """Item i is batch i (64 samples): the loader uses batch_size=None."""

    def __len__(self):
        return SLOW_BATCHES + FAST_BATCHES

    def __getitem__(self, i):
        if i < SLOW_BATCHES:
            time.sleep(DELAY_S)
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, 256, generator=g), torch.randint(0, 10, (64,), generator=g)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    loader = DataLoader(SlowThenFastBatches(), batch_size=None)
    model = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    steps = 0
    t0 = time.perf_counter()
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        steps += 1
        if steps in (SLOW_BATCHES, SLOW_BATCHES + FAST_BATCHES):
            phase = SLOW_BATCHES if steps == SLOW_BATCHES else FAST_BATCHES
            print(f"step {steps}: {(time.perf_counter() - t0) * 1e3 / phase:.1f} ms/step")
            t0 = time.perf_counter()
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
