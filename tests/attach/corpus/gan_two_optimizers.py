"""Shape: a GAN: two optimizers, the discriminator's then the generator's
step on each iteration.

The job counts generator steps (= iterations): 30.
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

    real = torch.randn(480, 2) * 0.5 + torch.tensor([2.0, -1.0])
    loader = DataLoader(TensorDataset(real), batch_size=16, shuffle=True)
    gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    disc = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1)).to(device)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-3, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    g_steps = 0
    for (batch,) in loader:
        batch = batch.to(device)
        n = batch.shape[0]
        ones, zeros = torch.ones(n, 1, device=device), torch.zeros(n, 1, device=device)
        # discriminator
        fake = gen(torch.randn(n, 8, device=device))
        opt_d.zero_grad()
        d_loss = bce(disc(batch), ones) + bce(disc(fake.detach()), zeros)
        d_loss.backward()
        opt_d.step()
        # generator
        opt_g.zero_grad()
        g_loss = bce(disc(fake), ones)
        g_loss.backward()
        opt_g.step()
        g_steps += 1
    print(f"d_loss {d_loss.item():.3f} g_loss {g_loss.item():.3f}")
    print(f"CORPUS steps={g_steps}", flush=True)


if __name__ == "__main__":
    main()
