"""Shape: a Trainer-style loop with callbacks, written out by hand (as HF
Trainer or Keras fit organise it): a Trainer class owns the loop, the
optimizer and the scheduler; callbacks get on_epoch_begin / on_batch_end /
on_epoch_end with the state; one of them logs, another evaluates under
no_grad at each epoch's end.

The job counts its optimizer steps (the trainer's global_step): 2 epochs x
20 batches = 40.
corpus: steps=40
"""
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Callback:
    def on_epoch_begin(self, trainer): pass
    def on_batch_end(self, trainer, loss): pass
    def on_epoch_end(self, trainer): pass


class LossLogger(Callback):
    def on_batch_end(self, trainer, loss):
        if trainer.global_step % 10 == 0:
            print(f"step {trainer.global_step}: loss {loss:.3f}")


class Evaluator(Callback):
    def __init__(self, loader):
        self.loader = loader

    def on_epoch_end(self, trainer):
        trainer.model.eval()
        with torch.no_grad():
            losses = [trainer.compute_loss(batch).item() for batch in self.loader]
        trainer.model.train()
        print(f"epoch {trainer.epoch}: eval loss {sum(losses) / len(losses):.3f}")


class Trainer:
    def __init__(self, model, train_loader, callbacks, device, epochs=2, lr=1e-3):
        self.model, self.train_loader, self.callbacks = model, train_loader, callbacks
        self.device, self.epochs = device, epochs
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: min(1.0, (s + 1) / 5))
        self.global_step = 0
        self.epoch = 0

    def compute_loss(self, batch):
        x, y = (t.to(self.device) for t in batch)
        return nn.functional.cross_entropy(self.model(x), y)

    def training_step(self, batch):
        loss = self.compute_loss(batch)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad()
        self.global_step += 1
        return loss.item()

    def fit(self):
        self.model.train()
        for self.epoch in range(self.epochs):
            for cb in self.callbacks:
                cb.on_epoch_begin(self)
            for batch in self.train_loader:
                loss = self.training_step(batch)
                for cb in self.callbacks:
                    cb.on_batch_end(self, loss)
            for cb in self.callbacks:
                cb.on_epoch_end(self)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device(args.device)

    x = torch.randn(400, 20)
    y = torch.randint(0, 4, (400,))
    train_loader = DataLoader(TensorDataset(x[:320], y[:320]), batch_size=16, shuffle=True)
    eval_loader = DataLoader(TensorDataset(x[320:], y[320:]), batch_size=40)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    trainer = Trainer(model, train_loader, [LossLogger(), Evaluator(eval_loader)], device)
    trainer.fit()
    print(f"CORPUS steps={trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
