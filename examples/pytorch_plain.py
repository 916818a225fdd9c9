"""A plain PyTorch CPU training loop with no liveprof in it, for `liveprof run`.

The same job as examples/pytorch_train.py, minus the annotations: a small CNN
learns synthetic 3x32x32 images from a DataLoader that sleeps
--loader-delay-ms per batch (a stand-in for slow decoding or storage) until
step --fast-after. Run unchanged under liveprof:

    build/bin/liveprof run -- /usr/bin/python3 examples/pytorch_plain.py \\
        --steps 200 --loader-delay-ms 30 --fast-after 100

and open the printed URL: the steps (each optimizer.step() ends one), their
input time (each wait for a batch) and the input-bound verdict and alert,
with no `import liveprof` here (docs/attach.md).

Uses Debian's python3-torch (CPU): run it with /usr/bin/python3.
"""

import argparse
import multiprocessing
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler


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


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--loader-delay-ms", type=float, default=30.0)
    p.add_argument("--fast-after", type=int, default=None, metavar="K",
                   help="from step K on the loader has no delay")
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--exit-code", type=int, default=0, help="exit with this status (tests)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)

    # With workers, the delay is switched off only after the batches the
    # workers prefetched (2 per worker) have been used.
    delay_s = multiprocessing.Value("d", args.loader_delay_ms / 1000.0, lock=False)
    data = SyntheticImages(4096, delay_s, seed=0)
    batches = BatchSampler(RandomSampler(data, replacement=True, num_samples=args.steps * args.batch_size),
                           args.batch_size, drop_last=True)
    loader = DataLoader(data, sampler=batches, batch_size=None, num_workers=args.num_workers)
    model = SmallCnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    t_last = time.perf_counter()
    for step, (images, labels) in enumerate(loader):
        if args.fast_after is not None and step + 1 == args.fast_after:
            delay_s.value = 0.0
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if not args.quiet and (step + 1) % 10 == 0:
            now = time.perf_counter()
            print(f"step {step + 1}: loss {loss.item():.3f}, {(now - t_last) * 100:.1f} ms/step", flush=True)
            t_last = now
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
