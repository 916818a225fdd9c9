#!/usr/bin/python3
"""The smallest liveprof setup for a PyTorch loop: connect, wrap the loader.

No scopes, no step calls: `wrap_loader` begins a step at each batch and
marks the wait for it as input; what is not input is the step's compute.
The dashboard's Overview, Input pipeline and Pod pages fill from this alone:

    build/bin/liveprof serve --ingest unix:/tmp/liveprof.sock &
    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_minimal.py \\
        --connect unix:/tmp/liveprof.sock

Uses Debian's python3-torch (CPU): run it with /usr/bin/python3.
"""

import argparse
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

import liveprof


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connect", required=True, metavar="ADDRESS",
                   help="liveprof serve --ingest ADDRESS (unix:/path or tcp:127.0.0.1:PORT)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--step-ms", type=float, default=5.0, help="extra compute per step (a sleep)")
    args = p.parse_args(argv)

    liveprof.connect(args.connect)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(args.steps * 16, 64), torch.randint(0, 4, (args.steps * 16,)))
    loader = DataLoader(data, batch_size=16)
    model = torch.nn.Linear(64, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in liveprof.wrap_loader(loader, step=0):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(args.step_ms / 1000)
    liveprof.disconnect()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
