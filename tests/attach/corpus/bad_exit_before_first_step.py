"""Shape (bad input): a job that exits before its first step (a config
check fails after the model is built): exit status 3, no step.

The job counts its optimizer steps: 0.
corpus: steps=0 exit=3
"""
import argparse
import sys

import torch
from torch import nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    model = nn.Linear(16, 2).to(args.device)
    torch.optim.SGD(model.parameters(), lr=0.05)
    print("CORPUS steps=0", flush=True)
    print("config check failed: no data", file=sys.stderr)
    sys.exit(3)


if __name__ == "__main__":
    main()
