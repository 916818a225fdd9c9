#!/usr/bin/python3
"""A real PyTorch CPU training loop annotated with liveprof (docs/python.md).

A small CNN learns to classify synthetic 3x32x32 images. The DataLoader's
slowness is a flag: each batch sleeps --loader-delay-ms before it is handed
over (a stand-in for slow decoding or storage), and --fast-after K drops the
delay from step K on, so one run shows an input-bound phase and a
compute-bound one. With --connect the events go to a liveprof server:

    build/bin/liveprof serve --ingest unix:/tmp/liveprof.sock &
    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_train.py \\
        --connect unix:/tmp/liveprof.sock --steps 200 --loader-delay-ms 30 --fast-after 100

then open the printed URL: the overview says "HIGHLY input-bound" and the
input_bound_high alert fires while the loader is slow, and both clear after.

Uses Debian's python3-torch (1.13, CPU): run it with /usr/bin/python3.
"""

import argparse
import multiprocessing
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

import liveprof
from pytorch_job import SmallCnn, SyntheticImages  # (examples/pytorch_job.py)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100, help="training steps (default 100)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--loader-delay-ms", type=float, default=30.0,
                   help="sleep per batch in the loader (default 30; 0: a fast loader)")
    p.add_argument("--fast-after", type=int, default=None, metavar="K",
                   help="from step K on the loader has no delay")
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader workers (default 0)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    p.add_argument("--connect", metavar="ADDRESS",
                   help="send to `liveprof serve --ingest ADDRESS` (unix:/path or "
                        "tcp:127.0.0.1:PORT); default: $LIVEPROF_SERVER if set, else nowhere")
    p.add_argument("--program", default="pytorch_train", help="the name the server shows")
    p.add_argument("--rank", type=int, default=None)
    p.add_argument("--level", type=int, choices=(1, 2), default=None,
                   help="host trace level (default: the module's, 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    if args.connect:
        liveprof.connect(args.connect, program=args.program, rank=args.rank)
    if args.level is not None:
        liveprof.set_level(args.level)

    delay_s = multiprocessing.Value("d", args.loader_delay_ms / 1000.0, lock=False)
    data = SyntheticImages(size=4096, delay_s=delay_s, seed=args.seed)
    batches = BatchSampler(
        RandomSampler(data, replacement=True, num_samples=args.steps * args.batch_size),
        args.batch_size, drop_last=True)
    loader = DataLoader(data, sampler=batches, batch_size=None, num_workers=args.num_workers)

    model = SmallCnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    # Each batch begins a step; the wait for it is the step's input time.
    t_last = time.perf_counter()
    for step, (images, labels) in enumerate(liveprof.wrap_loader(loader, step=0)):
        if args.fast_after is not None and step + 1 == args.fast_after:
            delay_s.value = 0.0  # the next batch (step K) comes without delay.
        # The whole body is the step's host compute (outside it, between the
        # batch and the next request, is only the loop itself: "All others");
        # its three phases are the rows the trace viewer and the op table show.
        with liveprof.scope("train_step"):
            with liveprof.scope("forward"):
                loss = F.cross_entropy(model(images), labels)
            with liveprof.scope("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            with liveprof.scope("optimizer"):
                optimizer.step()
            loss_value = loss.item()
            liveprof.counter("loss", loss_value)
        if not args.quiet and (step + 1) % 10 == 0:
            now = time.perf_counter()
            print(f"step {step + 1}: loss {loss_value:.3f}, {(now - t_last) * 100:.1f} ms/step",
                  flush=True)
            t_last = now

    if args.connect:
        st = liveprof.status()  # before disconnect(): the sender's counters go with it.
        print(f"sent {st['events_sent']} events in {st['batches_sent']} batches so far "
              f"({st['batches_acked']} acknowledged, ring drops {st['ring_dropped']})"
              + (f"; last error: {st['last_error']}" if st["last_error"] else ""), flush=True)
        liveprof.disconnect()  # sends the rest and waits for its acknowledgement.
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
