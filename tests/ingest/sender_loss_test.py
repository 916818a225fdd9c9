"""A sender whose server is killed and not restarted says what it lost
(ctest "ingest: a sender whose server is killed says
what it lost"). `liveprof example --connect` records steps for ~3 s while
`liveprof serve --ingest` is killed (SIGKILL) after ~1 s: the example must
exit non-zero, and its last line must account for every recorded event:
recorded = delivered + lost, lost > 0, delivered > 0, sent (first sends
only) <= recorded. Run: python3 sender_loss_test.py --liveprof BIN
(the standard library only; tests/python/liveprof_server.py starts the server).
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from liveprof_server import Server  # noqa: E402

LINE = re.compile(r"recorded (\d+) events: (\d+) delivered \(acknowledged\), (\d+) lost \((\d+) in full rings, "
                  r"(\d+) dropped unacknowledged, (\d+) unacknowledged at exit\); sent (\d+) events in (\d+) batches, "
                  r"(\d+) acknowledged, (\d+) events resent")


def fail(msg):
    raise AssertionError(msg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--liveprof", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="liveprof-sender-loss-")
    server = Server(args.liveprof, tmp)
    example = subprocess.Popen(
        [args.liveprof, "example", "--connect", "unix:" + server.sock, "--steps", "300", "--step-ms", "10"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Wait until the server has taken some of its events (not only
        # definitions or progress), let the acks reach it, then kill the
        # server for good.
        deadline = time.monotonic() + 30
        while True:
            ingest = server.get("/api/status").get("server", {}).get("ingest") or [{}]
            if ingest[0].get("events", 0) >= 200:
                time.sleep(0.2)
                break
            if time.monotonic() > deadline or example.poll() is not None:
                fail("the server took no batches: %s" % ingest)
            time.sleep(0.05)
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
        out, err = example.communicate(timeout=60)
    finally:
        if example.poll() is None:
            example.kill()
        server.stop()
    print(out, err, sep="\n", flush=True)
    if example.returncode != 1:
        fail("the example lost events and exited with %d, not 1" % example.returncode)
    m = LINE.search(out)
    if not m:
        fail("no accounting line in:\n" + out)
    recorded, delivered, lost, rings, dropped, unacked, sent, batches, acked, resent = map(int, m.groups())
    if recorded != delivered + lost:
        fail("recorded %d != delivered %d + lost %d" % (recorded, delivered, lost))
    if lost != rings + dropped + unacked:
        fail("lost %d != %d + %d + %d" % (lost, rings, dropped, unacked))
    if not (delivered > 0 and lost > 0):
        fail("delivered %d, lost %d: both should be > 0 (the server took some, then was killed)"
             % (delivered, lost))
    if sent > recorded:
        fail("sent %d > recorded %d: resends counted as sends" % (sent, recorded))
    if "were not delivered" not in err:
        fail("stderr does not say what was not delivered:\n" + err)
    print("ok: recorded %d = delivered %d + lost %d (%d unacknowledged at exit)" % (recorded, delivered, lost,
                                                                                  unacked))


if __name__ == "__main__":
    main()
