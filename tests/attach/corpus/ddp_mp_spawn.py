"""Shape: DDP over gloo with ranks started by torch.multiprocessing.spawn,
as PyTorch's DDP tutorial does: the parent sets MASTER_ADDR / MASTER_PORT,
each rank calls dist.init_process_group("gloo", rank=rank,
world_size=world_size); RANK is not in any environment. 2 ranks here,
4 in ddp_mp_spawn_4.py.

Each rank counts its optimizer steps: 20 (640 samples / 2 ranks / batch 16).
corpus: steps=20 ranks=2
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def setup(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()


def train(rank, world_size, device_name, samples):
    setup(rank, world_size)
    torch.set_num_threads(1)
    if device_name == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    torch.manual_seed(0)
    x = torch.randn(samples, 16)
    y = torch.randint(0, 2, (samples,))
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)).to(device),
                device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        optimizer.step()
        steps += 1
    dist.barrier()
    print(f"CORPUS rank={rank} steps={steps}\n", end="", flush=True)  # (one write: ranks share stdout)
    cleanup()


def run(world_size, samples):
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    mp.spawn(train, args=(world_size, args.device, samples), nprocs=world_size, join=True)


if __name__ == "__main__":
    run(world_size=2, samples=640)
