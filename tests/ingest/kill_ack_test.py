"""Acknowledged events survive `kill -9` of the server
(ctest "ingest: acknowledged events survive kill -9 of the server").

Each run: `liveprof serve --ingest unix:... --trace-dir RUN`; a Python
sender (the liveprof module) records counter samples 0, 1, 2, ... on one
thread, 50 at a time, for `--sender-s` seconds; the server is killed with
SIGKILL at a random moment once it has acknowledged some; the sender then stops
(waiting up to 1 s for acks that cannot come) and prints its status().
Then `liveprof open RUN` serves the folder, and its /api/export must hold
every acknowledged sample: the sender's events are acknowledged in order,
batch by batch, so `events_delivered` = D means samples 0 .. D-1.

Run: python3 kill_ack_test.py --liveprof BIN [--runs 20] [--seed N]
(PYTHONPATH holding the built liveprof package; the standard library only).
Prints one line per run and a summary; exits 1 if any acknowledged sample
is missing from any run.
"""

import argparse
import gzip
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from liveprof_server import Server  # noqa: E402

NAME = "kill-ack sample"

SENDER = r"""
import json, sys, time
import liveprof
liveprof.connect("unix:" + sys.argv[1], program="kill-ack", rank=0)
end = time.monotonic() + float(sys.argv[2])
i = 0
while time.monotonic() < end:
    for _ in range(50):
        liveprof.counter(%r, i)
        i += 1
    time.sleep(0.001)
liveprof.disconnect(timeout=1.0)
s = liveprof.status()
s["samples"] = i
print(json.dumps(s), flush=True)
""" % NAME


def fail(msg):
    raise AssertionError(msg)


def exported_samples(binary, run_dir, tmp):
    """The counter values named NAME in `liveprof open RUN`'s /api/export."""
    server = Server(binary, tmp, command=["open", run_dir])
    try:
        status = server.get("/api/trace")
        t1 = int(status.get("last_ns", 0)) + 1_000_000_000
        with urllib.request.urlopen("%s/api/export?t0=0&t1=%d" % (server.url, t1), timeout=60) as r:
            trace = json.loads(gzip.decompress(r.read()))
    finally:
        server.stop()
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    values = []
    for e in events:
        if e.get("name") == NAME and e.get("ph") == "C":
            values.extend(v for v in e.get("args", {}).values() if isinstance(v, (int, float)))
    return values


def one_run(binary, rng, sender_s, tmp):
    run_dir = os.path.join(tmp, "run")
    server = Server(binary, tmp, extra=["--trace-dir", run_dir])
    sender = subprocess.Popen([sys.executable, "-c", SENDER, server.sock, str(sender_s)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:  # until the server has acknowledged some of its events
            ingest = server.get("/api/status").get("server", {}).get("ingest") or [{}]
            if ingest[0].get("acked_seq", 0) >= 5:  # (the first may hold no events)
                break
            if time.monotonic() > deadline or sender.poll() is not None:
                fail("the server took no events: %s\n%s" % (ingest, "\n".join(server.log)))
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.8 * sender_s))
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        out, err = sender.communicate(timeout=60)
    finally:
        if sender.poll() is None:
            sender.kill()
        server.stop()
    if sender.returncode != 0:
        fail("the sender failed (%d):\n%s\n%s" % (sender.returncode, out, err))
    status = json.loads(out.strip().splitlines()[-1])
    delivered = status["events_delivered"]
    values = exported_samples(binary, run_dir, tmp)
    present = set(int(v) for v in values)
    missing = [i for i in range(delivered) if i not in present]
    return status["samples"], delivered, len(present), missing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--liveprof", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--sender-s", type=float, default=1.5)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print("seed %d" % args.seed, flush=True)
    total_delivered = total_missing = 0
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="liveprof-kill-ack-") as tmp:
            recorded, delivered, kept, missing = one_run(args.liveprof, rng, args.sender_s, tmp)
        total_delivered += delivered
        total_missing += len(missing)
        print("run %2d: recorded %d, acknowledged %d, in the folder %d, acknowledged but missing %d%s"
              % (run + 1, recorded, delivered, kept, len(missing),
                 " (first: %s)" % missing[:5] if missing else ""), flush=True)
        if delivered == 0:
            fail("run %d: nothing was acknowledged before the kill: the test proves nothing" % (run + 1))
    print("%d runs: %d events acknowledged, %d of them missing after kill -9"
          % (args.runs, total_delivered, total_missing), flush=True)
    if total_missing:
        fail("acknowledged events were lost")


if __name__ == "__main__":
    main()
