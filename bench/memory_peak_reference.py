#!/usr/bin/env python3
"""Independent reference for liveprof's memory breakdown at the peak.

Walks a PyTorch (Kineto) trace's JSON directly, without liveprof, and prints
per memory id: the peak of bytes in use (the sum of the live allocations the
trace shows; the latest event reaching the maximum wins), its time, and the
allocations live at that peak attributed to the innermost `cpu_op` /
`user_annotation` span (ph X) that encloses the `[memory]` event on the same
pid/tid (start <= ts < start + dur), ProfilerStep#N spans excluded (a step,
not an op). The numbers are recorded in
tests/aggregators/memory_attribution_test.cc; rerun with

    python3 bench/memory_peak_reference.py ../shared/data/gpu/h200/resnet18_h200_slowloader.pt.trace.json.gz

Times are read exactly (Decimal microseconds -> integer nanoseconds).
"""
import bisect
import collections
import gzip
import json
import sys
from decimal import Decimal

OP_CATS = {"cpu_op", "Operator", "user_annotation"}


def ns(v):
    return int((Decimal(str(v)) * 1000).to_integral_value(rounding="ROUND_HALF_EVEN"))


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f, parse_float=Decimal)["traceEvents"]


def memory_id(args):
    dev_type = int(args.get("Device Type", 0))
    dev_id = str(args.get("Device Id", 0))
    alloc = args.get("Allocator") or ("CUDA:" if dev_type == 1 else "CPU:") + dev_id
    return ("GPU:" + dev_id + " " + alloc) if dev_type == 1 else ("Host " + alloc)


def main(path, top):
    events = load(path)
    spans = collections.defaultdict(list)  # (pid, tid) -> [(start, end, name)]
    mem = []
    for i, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") in OP_CATS and not e["name"].startswith("ProfilerStep#"):
            start = ns(e["ts"])
            spans[(str(e["pid"]), str(e["tid"]))].append((start, start + ns(e.get("dur", 0)), e["name"]))
        elif e.get("ph") in ("i", "I") and e.get("name") == "[memory]":
            b = int(e["args"].get("Bytes", 0))
            if b != 0:
                mem.append((ns(e["ts"]), i, e, b))
    mem.sort(key=lambda m: (m[0], m[1]))
    for k in spans:
        spans[k].sort()

    def innermost(key, t):
        best = None
        for start, end, name in spans.get(key, []):
            if start > t:
                break
            if t < end and (best is None or end < best[1] or (end == best[1] and start > best[0])):
                best = (start, end, name)
        return best[2] if best else None

    state = {}
    for t, _, e, b in mem:
        mid = memory_id(e["args"])
        s = state.setdefault(mid, {"live": {}, "heap": 0, "peak": -1, "peak_ts": 0, "at_peak": None,
                                   "unknown_after_peak": [0, 0], "allocs": 0, "frees": 0})
        addr = int(e["args"].get("Addr", 0))
        key = (str(e["pid"]), str(e["tid"]))
        if b > 0:
            s["allocs"] += 1
            if addr in s["live"]:
                s["heap"] -= s["live"][addr][0]
            s["live"][addr] = (b, key, t)
            s["heap"] += b
        else:
            s["frees"] += 1
            if addr not in s["live"]:
                s["unknown_after_peak"][0] += 1
                s["unknown_after_peak"][1] += -b
                continue
            s["heap"] -= s["live"].pop(addr)[0]
        if s["heap"] >= s["peak"]:
            s["peak"], s["peak_ts"], s["at_peak"] = s["heap"], t, dict(s["live"])
            s["unknown_after_peak"] = [0, 0]

    out = {}
    for mid, s in sorted(state.items()):
        by_op = collections.defaultdict(lambda: [0, 0])
        rows = collections.Counter()
        for b, key, t in s["at_peak"].values():
            op = innermost(key, t) or ""
            by_op[op][0] += b
            by_op[op][1] += 1
            rows[(op, b)] += 1
        attributed = [sum(v[0] for k, v in by_op.items() if k), sum(v[1] for k, v in by_op.items() if k)]
        ops = sorted(((k, v[0], v[1]) for k, v in by_op.items() if k), key=lambda r: (-r[1], r[0]))
        out[mid] = {
            "peak_bytes": s["peak"], "peak_ts_ns": s["peak_ts"], "live_at_peak": len(s["at_peak"]),
            "attributed_bytes": attributed[0], "attributed_allocations": attributed[1],
            "unattributed_bytes": by_op[""][0], "unattributed_allocations": by_op[""][1],
            "unknown_frees_after_peak": s["unknown_after_peak"],
            "top_ops": ops[:top],
            "top_rows": sorted(((op, b, n) for (op, b), n in rows.items()), key=lambda r: (-r[1] * r[2], -r[1], r[0]))[:top],
        }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: memory_peak_reference.py TRACE.json[.gz] [TOP]")
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 8)
