#!/usr/bin/python3
"""Python overhead of the liveprof module's calls (target: <= 1 us per
`with liveprof.scope(name):`).

    cmake --build build --target liveprof_python
    PYTHONPATH=build/python /usr/bin/python3 bench/python_scope_bench.py

Each row times a loop of N iterations R times and prints the median and the
best per iteration, and the median less the empty loop's. The process is not
connected: its ring is emptied between repetitions (untimed, with the test
hook _drain_local), so "recording" rows write every event for real and none
is dropped. Rows:
  empty loop                     `for _ in r: pass`
  python CM (reference)          `with cm: pass`, cm a trivial Python class
  scope, recording               `with liveprof.scope("x"): pass` at level 2
  scope, level 1                 the same, not recorded: the level leaves it out
  scope, python scopes off       the same, not recorded: set_python_scopes(False)
  scope, tracing off             the same, not recorded: set_enabled(False)
  scope, cached name object      `with scope(name)` with `scope` a local
  input, recording               `with liveprof.input("load"): pass`
  step, recording                `with liveprof.step(i): pass` (a pure-Python class)
  counter, recording             `liveprof.counter("loss", 1.0)` (pybind11)
"""

import argparse
import statistics
import sys
import time

import liveprof
from liveprof import _liveprof


class TrivialCm:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def case_empty(n):
    for _ in range(n):
        pass


def case_python_cm(n):
    cm = TrivialCm()
    for _ in range(n):
        with cm:
            pass


def case_scope(n):
    for _ in range(n):
        with liveprof.scope("x"):
            pass


def case_scope_local(n):
    scope = liveprof.scope
    name = "x"
    for _ in range(n):
        with scope(name):
            pass


def case_input(n):
    for _ in range(n):
        with liveprof.input("load"):
            pass


def case_step(n):
    for i in range(n):
        with liveprof.step(i):
            pass


def case_counter(n):
    for _ in range(n):
        liveprof.counter("loss", 1.0)


def measure(fn, n, reps, setup=None):
    per = []
    for _ in range(reps):
        liveprof.set_enabled(True)
        liveprof.set_level(2)
        liveprof.set_python_scopes(True)
        if setup:
            setup()
        _liveprof._drain_local()
        t0 = time.perf_counter_ns()
        fn(n)
        per.append((time.perf_counter_ns() - t0) / n)
    liveprof.set_enabled(True)
    liveprof.set_level(2)
    liveprof.set_python_scopes(True)
    _liveprof._drain_local()
    return statistics.median(per), min(per)


def main(argv):
    ap = argparse.ArgumentParser(description="Python overhead of liveprof's calls")
    ap.add_argument("-n", type=int, default=20_000, help="iterations per repetition")
    ap.add_argument("-r", type=int, default=25, help="repetitions")
    args = ap.parse_args(argv)

    rows = [
        ("empty loop", case_empty, None),
        ("python CM (reference)", case_python_cm, None),
        ("scope, recording", case_scope, None),
        ("scope, level 1", case_scope, lambda: liveprof.set_level(1)),
        ("scope, python scopes off", case_scope, lambda: liveprof.set_python_scopes(False)),
        ("scope, tracing off", case_scope, lambda: liveprof.set_enabled(False)),
        ("scope, local name", case_scope_local, None),
        ("input, recording", case_input, None),
        ("step, recording", case_step, None),
        ("counter, recording", case_counter, None),
    ]
    case_scope(1000)  # warm: the name cache, this thread's ring.
    _liveprof._drain_local()
    results = [(label, *measure(fn, args.n, args.r, setup)) for label, fn, setup in rows]
    base = results[0][1]
    print("python %s, %d x %d iterations; ns per iteration" % (
        sys.version.split()[0], args.r, args.n))
    print("%-26s %10s %10s %14s" % ("case", "median", "best", "median - loop"))
    for label, med, best in results:
        print("%-26s %10.1f %10.1f %14.1f" % (label, med, best, med - base))
    d = _liveprof._diagnostics()
    if d["ring_dropped"]:
        print("note: %d events dropped by a full ring (raise -r/-n less)" % d["ring_dropped"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
