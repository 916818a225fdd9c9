"""Shape (bad input): a job with its own sitecustomize (on its PYTHONPATH:
it re-executes itself with the folder site/ added, as an environment
module would) and its own sys.excepthook, which dies of an error after 8
steps: its hook prints the error its own way, the exit status is 1.

The job counts its optimizer steps until then: 8.
corpus: steps=8 exit=1
"""
import argparse
import os
import sys

import torch
from torch import nn

SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")


def own_hook(kind, value, tb):
    print("own excepthook: %s: %s" % (kind.__name__, value), file=sys.stderr, flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    if os.environ.get("CORPUS_OWN_SITECUSTOMIZE") is None:
        if os.environ.get("CORPUS_REEXEC"):
            raise SystemExit("the job's own sitecustomize did not run")
        path = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = path + os.pathsep + SITE if path else SITE
        os.environ["CORPUS_REEXEC"] = "1"
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:])
    sys.excepthook = own_hook
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for _ in range(8):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(torch.randn(16, 16, device=device)),
                                    torch.randint(0, 2, (16,), device=device)).backward()
        optimizer.step()
        steps += 1
    print(f"CORPUS steps={steps}", flush=True)
    raise RuntimeError("the data went away")


if __name__ == "__main__":
    main()
