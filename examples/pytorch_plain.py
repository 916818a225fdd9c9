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
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

from pytorch_job import SmallCnn, SyntheticImages  # (examples/pytorch_job.py)


def write_kernel_counts(profiler, path):
    """torch.profiler's view of the run: each GPU kernel's count and total
    time, for comparison with liveprof's kernel stats (not its annotations on
    the GPU's timeline, such as "Optimizer.step#SGD.step")."""
    import json
    kernels = {}
    for e in profiler.events():
        if getattr(e, "device_type", None) is not None and str(e.device_type).endswith("CUDA") and \
                getattr(e, "is_legacy", False) is False and e.name and not e.name.startswith("Memcpy") and \
                not e.name.startswith("Memset") and not getattr(e, "is_user_annotation", False):
            k = kernels.setdefault(e.name, {"count": 0, "total_us": 0.0})
            k["count"] += 1
            k["total_us"] += e.time_range.elapsed_us()
    with open(path, "w") as f:
        json.dump({"kernels": kernels}, f, indent=1, sort_keys=True)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--loader-delay-ms", type=float, default=30.0)
    p.add_argument("--fast-after", type=int, default=None, metavar="K",
                   help="from step K on the loader has no delay")
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--exit-code", type=int, default=0, help="exit with this status (tests)")
    p.add_argument("--torch-profile", metavar="FILE",
                   help="for comparison (scripts/gpu-run-check.sh): run the loop under torch.profiler "
                        "and write its per-kernel counts and times to FILE (JSON)")
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
    device = torch.device(args.device)
    model = SmallCnn().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    profiler = None
    if args.torch_profile:
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        profiler = profile(activities=activities)
        profiler.__enter__()
    t_last = t_warm = time.perf_counter()
    for step, (images, labels) in enumerate(loader):
        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        if step == 10:
            t_warm = time.perf_counter()  # (the mean step time below leaves out the first 10)
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
    if device.type == "cuda":
        torch.cuda.synchronize()
    if profiler is not None:
        profiler.__exit__(None, None, None)
        write_kernel_counts(profiler, args.torch_profile)
    if args.steps > 10:
        print(f"mean step time {(time.perf_counter() - t_warm) * 1e3 / (args.steps - 10):.3f} ms "
              f"(steps 10-{args.steps - 1})", flush=True)
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
