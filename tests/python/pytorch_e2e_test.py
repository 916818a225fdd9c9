"""The issue's end-to-end test (ctest "python: pytorch example against
liveprof serve"): examples/pytorch_train.py, a real PyTorch CPU loop, sends to
`liveprof serve --ingest unix:...` with a slow loader for SLOW_STEPS steps
and a fast one after; through the REST API we check that

  - the input-bound classification flips: "HIGHLY input-bound" over the last
    5 steps while the loader is slow, "NOT input-bound" over the last 20
    (all fast) at the end (or, on a
    loaded machine, "POTENTIALLY": input under 5 % but the unannotated time
    over 3 %);
  - the per-step breakdown has the loader's wait as Input in the slow steps
    (every one: docs/python.md, "The DataLoader helper") and
    little in the fast ones;
  - the built-in alert input_bound_high (last 20 steps >= 20 %, fire after 2,
    resolve after 3: docs/alerts.md) fires during the slow phase and resolves
    in the fast one;
  - the source is seen with its program name, nothing dropped or lost.

Everything is polled against generous deadlines; no sleep is an assertion.
Run with /usr/bin/python3 (Debian's torch) and PYTHONPATH=<build>/python.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from liveprof_server import Server  # (tests/python/liveprof_server.py)

SLOW_STEPS = 30      # the alert's window is 20 steps and it fires after 2 breaches.
FAST_STEPS = 40      # ~19-23 fast steps bring the window under 20 % (5 %), + 3 to resolve.
FINAL_WINDOW = 20    # steps of the classification at the end (all fast).
DELAY_MS = 40        # the slow loader's wait per batch; a step computes ~10 ms here.
POLL_S = 0.05
RUN_DEADLINE_S = 240
SETTLE_DEADLINE_S = 60
HIGH_RULE = "input_bound_high"


def fail(msg):
    raise AssertionError(msg)


def observe(server, seen):
    """One poll: the classification of the last 5 steps and the alert's state."""
    ip = server.get("/api/input_pipeline?last=5")
    w = ip["window"]
    if w["steps"] > 0:
        seen.append((w["first_step"], w["last_step"], ip["bottleneck"]["input_classification"],
                     ip["bottleneck"]["input_pct"]))
    return ip


def alert_events(server, rule):
    return [h for h in server.get("/api/alerts")["history"] if h["rule"] == rule]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--liveprof", required=True)
    ap.add_argument("--example", required=True)
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError as e:
        fail("this test needs Debian's python3-torch for %s (scripts/setup.sh): %s"
             % (sys.executable, e))

    tmp = tempfile.mkdtemp(prefix="liveprof-py-e2e-")
    server = Server(args.liveprof, tmp)
    example = None
    try:
        print("server", server.url, "ingest", server.sock, flush=True)
        total = SLOW_STEPS + FAST_STEPS
        example = subprocess.Popen(
            [sys.executable, args.example, "--connect", "unix:" + server.sock,
             "--steps", str(total), "--fast-after", str(SLOW_STEPS),
             "--loader-delay-ms", str(DELAY_MS), "--program", "pytorch_e2e"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out_lines = []
        threading.Thread(target=lambda: out_lines.extend(example.stdout), daemon=True).start()

        # While it runs: the classification of the last 5 steps, every poll.
        seen = []
        deadline = time.monotonic() + RUN_DEADLINE_S
        while example.poll() is None:
            if time.monotonic() > deadline:
                example.kill()
                fail("the example did not finish in %d s:\n%s" % (RUN_DEADLINE_S, "".join(out_lines)))
            observe(server, seen)
            time.sleep(POLL_S)
        example.wait()
        time.sleep(0.2)  # the reader thread's last lines (output only, not asserted).
        print("".join(out_lines), end="", flush=True)
        if example.returncode != 0:
            fail("the example exited with %d" % example.returncode)

        # Then until the last step is in and the alert has resolved.
        deadline = time.monotonic() + SETTLE_DEADLINE_S
        while True:
            observe(server, seen)
            events = alert_events(server, HIGH_RULE)
            done = (seen and seen[-1][1] == total - 1
                    and any(e["state"] == "resolved" for e in events))
            if done or time.monotonic() > deadline:
                break
            time.sleep(POLL_S)

        # 1. The classification flips.
        slow = [s for s in seen if s[1] < SLOW_STEPS and s[0] >= 1]
        print("classification while slow (steps, class, input %):",
              sorted(set((a, b, c) for a, b, c, _ in slow))[-3:], flush=True)
        if not any(c == "HIGHLY input-bound" for _, _, c, _ in slow):
            fail("never 'HIGHLY input-bound' over 5 slow steps; seen: %s" % seen)
        # At the end, over the last FINAL_WINDOW steps (all fast): a wider
        # window than the 5 polled, so that a preemption of the loop on a
        # loaded machine (a few ms landing in one step's batch fetch: 6.6 %
        # of 5 steps was seen with two CPU hogs) does not decide the class.
        end = server.get("/api/input_pipeline?last=%d" % FINAL_WINDOW)
        first, last = end["window"]["first_step"], end["window"]["last_step"]
        cls, pct = end["bottleneck"]["input_classification"], end["bottleneck"]["input_pct"]
        print("classification at the end: steps %d-%d %s (input %.2f %%)" % (first, last, cls, pct))
        if last != total - 1 or first < SLOW_STEPS:
            fail("the last steps seen are %d-%d, not %d-%d" % (first, last, total - FINAL_WINDOW, total - 1))
        # NOT input-bound: input under 5 % and "All others" under 3 %. On a
        # loaded machine the loop's own unannotated moments (between a batch
        # and its train_step scope) can pass 3 %, which xprof calls
        # POTENTIALLY input-bound: accepted, with the input share still < 5 %.
        if cls not in ("NOT input-bound", "POTENTIALLY input-bound") or pct >= 5:
            fail("the last %d (fast) steps are %s (input %.2f %%), not 'NOT input-bound'" % (FINAL_WINDOW, cls, pct))

        # 2. Per step: the loader's wait is Input.
        steps = server.get("/api/steps?last=%d" % total)
        col = steps["columns"].index("Input")
        rows = {r["step"]: r for r in steps["rows"]}
        if sorted(rows) != list(range(total)):
            fail("steps seen: %s, not 0..%d" % (sorted(rows), total - 1))
        missing = []
        for n, r in sorted(rows.items()):
            inp = r["ms"][col]
            if n < SLOW_STEPS and inp < 0.75 * DELAY_MS:
                missing.append((n, inp, r))
            if n > SLOW_STEPS and inp > 0.25 * DELAY_MS:
                fail("fast step %d has %.3f ms of input: %s" % (n, inp, r))
        # The input span begins at its step's own clock reading, on the
        # sender and on the server (both ends of a span are mapped by their
        # own time): every slow step has its input.
        if missing:
            fail("%d slow steps without their input (~%d ms expected): %s"
                 % (len(missing), DELAY_MS, "; ".join("step %d: %.3f ms %s" % m for m in missing)))

        # 3. The alert fired while slow and resolved after.
        events = alert_events(server, HIGH_RULE)
        print("alert history:", [(e["state"], round(e["value"], 1), e["first_step"], e["last_step"])
                                 for e in events], flush=True)
        fired = [e for e in events if e["state"] == "firing"]
        resolved = [e for e in events if e["state"] == "resolved"]
        if not fired or fired[0]["last_step"] >= SLOW_STEPS:
            fail("%s did not fire during the slow steps: %s" % (HIGH_RULE, events))
        if not resolved or resolved[-1]["last_step"] < SLOW_STEPS or resolved[-1]["ts_ns"] < fired[0]["ts_ns"]:
            fail("%s did not resolve in the fast steps: %s" % (HIGH_RULE, events))
        state = {r["name"]: r["state"] for r in server.get("/api/alerts")["rules"]}
        if state[HIGH_RULE] != "ok":
            fail("%s is %s at the end" % (HIGH_RULE, state[HIGH_RULE]))

        # 4. The source: named, nothing lost.
        status = server.get("/api/status")
        src = [s for s in status["server"]["ingest"] if s["program"] == "pytorch_e2e"]
        if len(src) != 1:
            fail("ingest sources: %s" % status["server"]["ingest"])
        s = src[0]
        if s["events"] == 0 or s["lost_batches"] or s["sender_dropped"] or s["ring_dropped"]:
            fail("source counters: %s" % s)
        diag = {d["name"]: d["count"] for d in status["diagnostics"] if d["count"]}
        print("source: %d events, %d batches; diagnostics: %s" % (s["events"], s["batches"], diag))

        # 5. The job disconnected cleanly: it has finished, not stalled
        # (serve looks at its sources once a second).
        deadline = time.monotonic() + 10
        while status.get("job_state") != "finished" and time.monotonic() < deadline:
            time.sleep(POLL_S)
            status = server.get("/api/status")
        if status.get("job_state") != "finished":
            fail("job_state is %r after a clean disconnect, not 'finished'" % status.get("job_state"))
        print("OK", flush=True)
        return 0
    finally:
        if example is not None and example.poll() is None:
            example.kill()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print("FAILED:", e, file=sys.stderr, flush=True)
        sys.exit(1)
