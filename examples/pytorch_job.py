"""The job both PyTorch examples train (pytorch_train.py, annotated with
liveprof; pytorch_plain.py, not): a small CNN on synthetic 3x32x32 images
whose loader sleeps a settable delay per batch."""

import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset


class SyntheticImages(Dataset):
    """`size` random images whose label (0..2) brightens one colour channel;
    indexed by a list of indices, it returns a whole batch, after sleeping
    `delay_s` (a multiprocessing.Value: loader workers see a change)."""

    def __init__(self, size, delay_s, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 3, (size,), generator=g)
        self.images = torch.randn(size, 3, 32, 32, generator=g)
        self.images[torch.arange(size), self.labels] += 0.2
        self.delay_s = delay_s

    def __len__(self):
        return len(self.images)

    def __getitem__(self, indices):
        if self.delay_s.value > 0:
            time.sleep(self.delay_s.value)
        return self.images[indices], self.labels[indices]


class SmallCnn(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 8 * 8, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))
