"""Shape: an inference-only loop: a model in eval mode under
torch.inference_mode() over a DataLoader; no optimizer, no backward.

The job makes no optimizer step: 0 (liveprof should say there are no
training steps, and how to mark steps).
corpus: steps=0
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

    x = torch.randn(960, 3, 16, 16)
    loader = DataLoader(TensorDataset(x), batch_size=32)
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 10)).to(device).eval()
    predictions = []
    with torch.inference_mode():
        for (xb,) in loader:
            predictions.append(model(xb.to(device)).argmax(dim=1).cpu())
    print(f"predicted {torch.cat(predictions).numel()} images in {len(predictions)} batches")
    print("CORPUS steps=0", flush=True)


if __name__ == "__main__":
    main()
