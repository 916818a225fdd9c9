"""Shape: DDP over gloo in ranks started as torchrun starts them: RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT in each
rank's environment, init_process_group("gloo") from the environment
(env://). Run without RANK, the script is its own launcher (a stand-in for
torchrun, whose Debian build fails on Python 3.11): it starts itself twice
with that environment and exits with the first failing rank's status.

Each rank counts its optimizer steps: 20 (DistributedSampler: 640 samples /
2 ranks / batch 16).
corpus: steps=20 ranks=2
"""
import argparse
import os
import socket
import subprocess
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

WORLD_SIZE = 2


def launch():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(WORLD_SIZE):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD_SIZE),
                   LOCAL_WORLD_SIZE=str(WORLD_SIZE), GROUP_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env=env))
    codes = [p.wait() for p in procs]
    return next((c for c in codes if c != 0), 0)


def train(device_name):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    if device_name == "cuda":
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    torch.manual_seed(0)
    x = torch.randn(640, 16)
    y = torch.randint(0, 2, (640,))
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device),
                device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    sampler.set_epoch(0)
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        optimizer.step()
        steps += 1
    dist.barrier()
    print(f"CORPUS rank={rank} steps={steps}\n", end="", flush=True)  # (one write: ranks share stdout)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.set_num_threads(1)
    if "RANK" not in os.environ:
        sys.exit(launch())
    train(args.device)


if __name__ == "__main__":
    main()
