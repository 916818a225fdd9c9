"""Shape: DDP over gloo with 4 ranks started by torch.multiprocessing.spawn
(ddp_mp_spawn.py's loop, PyTorch's DDP tutorial; RANK is in no
environment).

Each rank counts its optimizer steps: 10 (640 samples / 4 ranks / batch 16).
corpus: steps=10 ranks=4
"""
from ddp_mp_spawn import run

if __name__ == "__main__":
    run(world_size=4, samples=640)
