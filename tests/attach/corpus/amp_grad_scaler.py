"""Shape: automatic mixed precision: autocast and a GradScaler
(torch.cuda.amp.GradScaler(enabled=device == "cuda"): on the CPU both are
off and scaler.step() is optimizer.step(); on CUDA a step with inf/NaN
gradients is skipped inside scaler.step()).

The job counts its iterations as the job does: one per scaler.step() call,
30 (a skipped step still counts: that is what the script's loop counts).
corpus: steps=30
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
    use_amp = device.type == "cuda"

    x = torch.randn(480, 64)
    y = torch.randint(0, 10, (480,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.cuda.amp.GradScaler(enabled=use_amp)
    steps = 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.float16 if use_amp else torch.bfloat16,
                            enabled=use_amp):
            loss = nn.functional.cross_entropy(model(xb), yb)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        steps += 1
    print(f"loss {loss.item():.3f} scale {scaler.get_scale() if use_amp else 1.0}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
