#!/usr/bin/env python3
"""Soak: `liveprof demo` under the simulated workload at 1 M events/s with 20
WebSocket clients subscribed to every view (and 2 of them to the events
feed) for 30 minutes. Every 10 s: the server's RSS, the events
consumed and dropped (/api/status), each client's frames. At the end: RSS
after warm-up (first and last minute, the growth between), drops explained
(the rings' and the feed's, by /api/status's own counters) and any client
that stopped receiving.

Run with Debian's Python (python3-websockets):
  /usr/bin/python3 bench/soak.py [--liveprof build/bin/liveprof] [--minutes 30]
Not in CI (30 minutes); bench/RESULTS.md keeps the latest figures.
"""
import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

import websockets

from hostile_clients import rss_mib  # (bench/, beside this script)

VIEWS = ["overview", "steps", "input_pipeline", "tf_stats", "kernel_stats", "memory", "alerts", "status", "pod"]


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


async def client(port, i, counts, stop):
    topics = VIEWS + (["events"] if i < 2 else [])
    while not stop.is_set():
        try:
            async with websockets.connect(f"ws://127.0.0.1:{port}/ws", subprotocols=["liveprof"],
                                          origin=f"http://127.0.0.1:{port}", max_size=None) as ws:
                await ws.send(json.dumps({"type": "subscribe", "topics": topics}))
                while not stop.is_set():
                    try:
                        await asyncio.wait_for(ws.recv(), timeout=1)
                        counts[i] += 1
                    except asyncio.TimeoutError:
                        pass
        except (OSError, websockets.WebSocketException):
            counts[f"reconnects{i}"] = counts.get(f"reconnects{i}", 0) + 1
            await asyncio.sleep(1)


def cpu_seconds(pid):
    """The process's user + system CPU time, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_idle():
    """(idle, total) jiffies of all cores."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[3] + v[4], sum(v)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--liveprof", default="build/bin/liveprof")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--rate", type=float, default=1e6)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("extra", nargs="*", help="more arguments for liveprof demo (after --)")
    args = ap.parse_args()
    p = subprocess.Popen([args.liveprof, "demo", "--port", "0", "--rate", str(int(args.rate))] + args.extra,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    for line in p.stdout:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        sys.exit("liveprof demo printed no URL")
    loop = asyncio.get_running_loop()
    loop.run_in_executor(None, lambda: [None for _ in p.stdout])
    counts = {i: 0 for i in range(args.clients)}
    stop = asyncio.Event()
    tasks = [asyncio.create_task(client(port, i, counts, stop)) for i in range(args.clients)]
    samples = []
    t0 = time.monotonic()
    end = t0 + args.minutes * 60
    last_frames = dict(counts)
    stalled = set()
    cpu0, idle0 = cpu_seconds(p.pid), machine_idle()
    while time.monotonic() < end:
        await asyncio.sleep(10)
        s = await loop.run_in_executor(None, get, port, "/api/status")
        rss = rss_mib(p.pid)
        cpu1, idle1 = cpu_seconds(p.pid), machine_idle()
        server_cpu = (cpu1 - cpu0) / 10 * 100
        idle = 100 * (idle1[0] - idle0[0]) / max(1, idle1[1] - idle0[1])
        cpu0, idle0 = cpu1, idle1
        worst = max(s.get("pipeline_cost", []), key=lambda c: c["max_batch_ms"], default=None)
        for i in range(args.clients):
            if counts[i] == last_frames[i]:
                stalled.add(i)
        last_frames = {i: counts[i] for i in range(args.clients)}
        samples.append((time.monotonic() - t0, rss, s.get("events_consumed", 0), s.get("events_dropped", 0)))
        print(f"{samples[-1][0]:7.0f} s  RSS {rss:7.1f} MiB  consumed {samples[-1][2]:>13,}  "
              f"dropped {samples[-1][3]:>10,}  frames/client min {min(last_frames.values()):,}  "
              f"server CPU {server_cpu:4.0f} %  machine idle {idle:3.0f} %"
              + (f"  longest batch {worst['name']} {worst['max_batch_ms']:.1f} ms" if worst else ""), flush=True)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    status = get(port, "/api/status")
    # The pipeline thread's time per analysis and stage: its longest batch, and how
    # many batches held the drain back over 10 ms.
    for c in sorted(status.get("pipeline_cost", []), key=lambda c: -c["max_batch_ms"]):
        print(f"  {c['name']:<20} total {c['total_ms'] / 1000:8.1f} s  longest batch {c['max_batch_ms']:7.1f} ms  "
              f"batches over 10 ms {c['batches_over_10ms']:>6,} of {c['batches']:,}")
    p.terminate()
    p.wait()
    warm = [r for t, r, _, _ in samples if t >= 60] or [r for _, r, _, _ in samples]  # (a run under a minute)
    first = [r for t, r, _, _ in samples if 60 <= t < 120] or warm[:6]
    last = [r for t, r, _, _ in samples if t >= samples[-1][0] - 60]
    elapsed = samples[-1][0] - samples[0][0]
    rate = (samples[-1][2] - samples[0][2]) / elapsed if elapsed > 0 else 0
    print(f"minutes {args.minutes}, clients {args.clients}: consumed {rate / 1e6:.2f} M events/s; "
          f"RSS after warm-up {min(first):.1f}-{max(first):.1f} MiB (minute 2), "
          f"{min(last):.1f}-{max(last):.1f} MiB (last minute), max {max(warm):.1f}; "
          f"dropped {samples[-1][3]:,} (rings); clients that stalled a 10 s period: {sorted(stalled)}; "
          f"reconnects: {sum(v for k, v in counts.items() if str(k).startswith('reconnects'))}; "
          f"server: {json.dumps(status.get('server', {}).get('sessions_closed_blocked', 0))} sessions closed blocked; "
          f"pipeline backlog at most {status.get('pipeline_backlog', {}).get('max_events', 0):,} events")


if __name__ == "__main__":
    asyncio.run(main())
