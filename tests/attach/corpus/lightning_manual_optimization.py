"""Shape: a Lightning-style manual-optimization loop written out by hand:
a LightningModule-like class (automatic_optimization = False) whose
training_step gets its optimizers from self.optimizers(), calls
self.manual_backward(loss) and opt.step() / opt.zero_grad() itself, and a
tiny fit loop that drives it with validation_step under no_grad per epoch.

The job counts its optimizer steps: 3 epochs x 12 batches = 36.
corpus: steps=36
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LightningModuleLike(nn.Module):
    automatic_optimization = True

    def optimizers(self):
        return self._optimizers[0] if len(self._optimizers) == 1 else self._optimizers

    def manual_backward(self, loss):
        loss.backward()

    def log(self, name, value):
        self.logged[name] = float(value)


class LitRegressor(LightningModuleLike):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.net = nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, 1))
        self.logged = {}
        self.optimizer_steps = 0

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        opt.zero_grad()
        self.manual_backward(loss)
        opt.step()
        self.optimizer_steps += 1
        self.log("train_loss", loss.detach())

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self(x), y))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=3e-3)


def fit(module, train_loader, val_loader, max_epochs, device):
    module.to(device)
    opt = module.configure_optimizers()
    module._optimizers = opt if isinstance(opt, (list, tuple)) else [opt]
    to = lambda batch: [t.to(device) for t in batch]  # noqa: E731
    for epoch in range(max_epochs):
        module.train()
        for i, batch in enumerate(train_loader):
            module.training_step(to(batch), i)
        module.eval()
        with torch.no_grad():
            for i, batch in enumerate(val_loader):
                module.validation_step(to(batch), i)
        print(f"epoch {epoch}: {module.logged}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(240, 8)
    y = x[:, :2].prod(dim=1, keepdim=True)
    train_loader = DataLoader(TensorDataset(x[:192], y[:192]), batch_size=16, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[192:], y[192:]), batch_size=16)
    module = LitRegressor()
    fit(module, train_loader, val_loader, max_epochs=3, device=torch.device(args.device))
    print(f"CORPUS steps={module.optimizer_steps}", flush=True)


if __name__ == "__main__":
    main()
