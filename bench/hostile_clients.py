#!/usr/bin/env python3
"""A good client's latency while attackers hold connections.

Starts `liveprof demo` and, for each attack, measures GET /api/status from
127.0.0.1 on a new connection each time (200 requests): p50, p99, max, and
how many were not answered 200. Attacks, each from ten loopback addresses
(127.0.0.1 .. 127.0.0.10):
  none      no attacker (the baseline)
  idle      2,000 connections that send nothing
  slow      2,000 connections that send half a request header
  mixed     1,000 of each, reopened as the server closes them
and, on the ingest, 40 unix connections holding 15 MiB of an unfinished
frame each: the server's RSS during and after, and a real sender meanwhile.

Run: python3 bench/hostile_clients.py [--liveprof build/bin/liveprof]
Prints one line per attack; bench/RESULTS.md keeps the latest.
"""
import argparse
import re
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time

ATTACKERS = 2000
REQUESTS = 200


def start(liveprof):
    p = subprocess.Popen([liveprof, "demo", "--port", "0", "--scenario", "balanced"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 20
    out = ""
    while time.time() < deadline:
        line = p.stdout.readline()
        out += line
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
            return p, int(m.group(1))
    p.kill()
    sys.exit("liveprof demo printed no URL:\n" + out)


def get_status(port):
    """One request on a new connection: (seconds, status or None)."""
    t0 = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else None
    except OSError:
        status = None
    return time.perf_counter() - t0, status


class Attack:
    """Keeps `count` attacker connections open (reopening closed ones) until stopped."""

    def __init__(self, port, count, slow_share):
        self.port, self.count, self.slow_share = port, count, slow_share
        self.stop = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open_one(self, i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((f"127.0.0.{1 + i % 10}", 0))
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        self.opened += 1
        return s

    def run(self):
        sel = selectors.DefaultSelector()
        for i in range(self.count):
            s = self.open_one(i)
            sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, i)
        while not self.stop.is_set():
            for key, events in sel.select(timeout=0.1):
                s, i = key.fileobj, key.data
                if events & selectors.EVENT_WRITE:
                    if i < self.count * self.slow_share:
                        try:
                            s.send(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                        except OSError:
                            pass
                    sel.modify(s, selectors.EVENT_READ, i)
                    continue
                try:
                    gone = not s.recv(4096)
                except OSError:
                    gone = True
                if gone:  # closed by the server: open another in its place.
                    sel.unregister(s)
                    s.close()
                    n = self.open_one(i)
                    sel.register(n, selectors.EVENT_READ | selectors.EVENT_WRITE, i)
        for key in list(sel.get_map().values()):
            key.fileobj.close()

    def __enter__(self):
        self.thread.start()
        time.sleep(2)  # the connections are open and accepted.
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def measure(port):
    times, bad = [], 0
    for _ in range(REQUESTS):
        t, status = get_status(port)
        times.append(t * 1000)
        bad += status != 200
    times.sort()
    return {"p50": statistics.median(times), "p99": times[int(0.99 * len(times)) - 1], "max": times[-1],
            "not_200": bad}


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def hold_torn(sock, count, torn, ready, release):
    """In a process of its own (a peer: the server caps each at 16
    sources): `count` unix connections, each sent `torn` (a frame that
    never ends), held until `release` is set."""
    conns = []
    for _ in range(count):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(sock)
        c.setblocking(False)
        conns.append([c, 0])
    deadline = time.time() + 20
    while time.time() < deadline and any(off < len(torn) for _, off in conns):
        for entry in conns:
            c, off = entry
            if off >= len(torn):
                continue
            try:
                entry[1] += c.send(torn[off:off + (1 << 20)])
            except BlockingIOError:
                pass
            except OSError:
                entry[1] = len(torn)  # closed by the server
        time.sleep(0.001)
    ready.set()
    release.wait(120)
    for c, _ in conns:
        c.close()


def ingest_attack(liveprof):
    """40 unix connections each holding 15 MiB of a frame that never ends
    (the issue's attack), from 4 processes (10 each: one process may hold
    16), then a real sender (`liveprof example`) during it: the server's
    RSS during and after, the sender's result."""
    import multiprocessing
    import os
    import tempfile
    d = tempfile.mkdtemp(prefix="liveprof-bench-")
    sock = os.path.join(d, "ingest.sock")
    p = subprocess.Popen([liveprof, "serve", "--port", "0", "--ingest", f"unix:{sock}"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
    for _ in range(100):
        if os.path.exists(sock):
            break
        time.sleep(0.1)
    time.sleep(1)
    base = rss_mib(p.pid)
    torn = (16 << 20).to_bytes(4, "little") + b"x" * (15 << 20)  # 15 MiB of a 16 MiB frame
    ctx = multiprocessing.get_context("fork")
    release = ctx.Event()
    holders = []
    for _ in range(4):
        ready = ctx.Event()
        h = ctx.Process(target=hold_torn, args=(sock, 10, torn, ready, release))
        h.start()
        holders.append((h, ready))
    for _, ready in holders:
        ready.wait(60)
    time.sleep(1)
    during = rss_mib(p.pid)
    t0 = time.time()
    r = subprocess.run([liveprof, "example", "--steps", "50", "--step-ms", "5", "--connect", f"unix:{sock}"],
                       capture_output=True, text=True, timeout=60)
    took = time.time() - t0
    release.set()
    for h, _ in holders:
        h.join(30)
    time.sleep(2)
    after = rss_mib(p.pid)
    p.terminate()
    p.wait()
    last = (r.stdout.strip().splitlines() or [""])[-1]
    print(f"ingest 40 x 15 MiB torn frames from 4 processes: RSS {base:.0f} MiB before, {during:.0f} MiB during, "
          f"{after:.0f} MiB after they closed; a real sender meanwhile: exit {r.returncode} in {took:.1f} s: {last}",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--liveprof", default="build/bin/liveprof")
    args = ap.parse_args()
    ingest_attack(args.liveprof)
    p, port = start(args.liveprof)
    try:
        time.sleep(2)
        for name, count, slow in [("none", 0, 0), ("idle", ATTACKERS, 0), ("slow", ATTACKERS, 1),
                                  ("mixed", ATTACKERS, 0.5)]:
            if count == 0:
                r = measure(port)
                opened = 0
            else:
                with Attack(port, count, slow) as a:
                    r = measure(port)
                    opened = a.opened
            print(f"{name:6s} attackers {count:5d} (opened {opened:5d}): p50 {r['p50']:.2f} ms, "
                  f"p99 {r['p99']:.2f} ms, max {r['max']:.2f} ms, not 200: {r['not_200']} of {REQUESTS}",
                  flush=True)
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    main()
