"""Shape: train, then validate under torch.no_grad() on a validation
DataLoader, each epoch (model.train() / model.eval()).

The job counts its optimizer steps: 3 epochs x 15 batches = 45 (the
validation batches are no steps).
corpus: steps=45
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

    x = torch.randn(300, 1, 12, 12)
    y = torch.randint(0, 4, (300,))
    train_loader = DataLoader(TensorDataset(x[:240], y[:240]), batch_size=16, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[240:], y[240:]), batch_size=8)
    model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 10 * 10, 4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    steps = 0
    for epoch in range(3):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            steps += 1
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in val_loader:
                images, labels = images.to(device), labels.to(device)
                correct += (model(images).argmax(1) == labels).sum().item()
        print(f"epoch {epoch}: train loss {loss.item():.3f}, val acc {correct / 60:.2f}")
    print(f"CORPUS steps={steps}", flush=True)


if __name__ == "__main__":
    main()
