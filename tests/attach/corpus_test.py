"""A corpus of ordinary training loops under `liveprof run`.

Each script in tests/attach/corpus/ is a plain CPU PyTorch training script
(no `import liveprof`) of one common loop shape. It counts its own optimizer
steps and prints them last: `CORPUS steps=N`, or one `CORPUS rank=R steps=N`
per rank. Its docstring has a line of tags for this runner:

    corpus: steps=N [ranks=R] [exit=S] [alert=input_bound_high] [cuda=no]

(the count the job should print, its ranks, its exit status, an alert that
must fire and then resolve, and whether it can run with --device cuda).

Each script runs under

    liveprof run --port 0 --linger 120 -- /usr/bin/python3 SCRIPT --device D

and the runner checks, for each:

  - the job printed the count its tags say (the corpus itself is right);
  - `liveprof run` ended with the job's exit status, and said so;
  - liveprof's steps per rank equal the job's own count: `/api/pod`'s
    workers (one per rank, "rank R" where there are several; none for a job
    with no steps), and for a single process `/api/steps` (steps_total and
    the rows' step numbers: 0..N-1, the first and the last step included)
    and `/api/status` (steps_closed; step_source "none" when the job made
    no optimizer step);
  - where the tags say so, input_bound_high fired and then resolved.

liveprof's numbers are polled until they equal the job's, or until they
have stood still for a few seconds after the job ended and its sources
disconnected, or until a deadline. Scripts run --jobs at a time (2: a
2-core machine). One line per script (name, the job's steps, liveprof's,
wall seconds, PASS/FAIL, and why), a summary, and exit status 1 if any
failed.

    /usr/bin/python3 tests/attach/corpus_test.py [--liveprof build/bin/liveprof]
        [--only REGEX] [--device cpu|cuda] [--jobs 2] [-v]
"""

import argparse
import concurrent.futures
import glob
import os
import re
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from liveprof_server import LISTENING, Proc  # noqa: E402  (tests/python/liveprof_server.py)

CORPUS = os.path.join(HERE, "corpus")
PYTHON = "/usr/bin/python3"
JOB_DEADLINE_S = 180     # from the start of `liveprof run` to the job's end
SETTLE_DEADLINE_S = 45   # from the job's end to liveprof's numbers matching
STILL_S = 5              # numbers unchanged this long after the end: final
LINGER_S = 120           # > SETTLE_DEADLINE_S: the server outlives the checks
CORPUS_LINE = re.compile(r"CORPUS (?:rank=(\d+) )?steps=(\d+)")
JOB_END = re.compile(r"liveprof run: the job (exited with status (\d+)|killed by \S+ \(status (\d+)\))")

print_lock = threading.Lock()


def tags_of(path):
    """The script's `corpus:` tags: steps, ranks, exit, alert, cuda."""
    with open(path) as f:
        text = f.read()
    m = re.search(r"^corpus:(.*)$", text, re.M)
    if not m:
        raise SystemExit("%s: no `corpus:` line in its docstring" % path)
    tags = {"ranks": "1", "exit": "0", "alert": "", "cuda": "yes"}
    for item in m.group(1).split():
        key, _, value = item.partition("=")
        if key not in ("steps", "ranks", "exit", "alert", "cuda"):
            raise SystemExit("%s: unknown corpus tag %r" % (path, key))
        tags[key] = value
    if "steps" not in tags:
        raise SystemExit("%s: no steps= in its corpus tags" % path)
    return {"steps": int(tags["steps"]), "ranks": int(tags["ranks"]), "exit": int(tags["exit"]),
            "alert": tags["alert"], "cuda": tags["cuda"] != "no"}


class Run(Proc):
    """`liveprof run ... -- python SCRIPT`, once its dashboard listens."""

    def __init__(self, liveprof, script, device):
        super().__init__([liveprof, "run", "--port", "0", "--linger", str(LINGER_S), "--", PYTHON, script,
                          "--device", device], env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"), cwd=CORPUS,
                         start_new_session=True,  # (a Ctrl-C to the runner is not the job's; kill() ends its session)
                         ready=[LISTENING], ready_s=60)


def job_counts(log):
    """The job's CORPUS lines: {rank: steps} (rank 0 for a single process).
    Found anywhere in the output: ranks that share a pipe may interleave."""
    counts, dupes = {}, []
    for m in CORPUS_LINE.finditer("\n".join(log)):
        rank = int(m.group(1)) if m.group(1) is not None else 0
        if rank in counts:
            dupes.append(rank)
        counts[rank] = int(m.group(2))
    return counts, dupes


def observe(run):
    """What liveprof shows now: the Pod page's workers, the steps view,
    the status (its step source, its sources), the alert history."""
    pod = run.get("/api/pod")
    steps = run.get("/api/steps?last=1000")
    status = run.get("/api/status")
    alerts = run.get("/api/alerts")
    ingest = status.get("server", {}).get("ingest", [])
    return {
        # (label, its steps: steps_total where the server has it, else the
        # newest at most 100, first, last, step_source or None)
        "workers": sorted((w["label"], w.get("steps_total", w["steps"]), w["first_step"], w["last_step"],
                           w.get("step_source")) for w in pod["workers"]),
        "steps_total": steps.get("steps_total"),
        "step_numbers": [r["step"] for r in steps["rows"]],
        "steps_closed": status.get("steps_closed"),
        "step_source": status.get("step_source"),
        # /api/status's step_sources: per process with steps, where they come from.
        "step_sources": sorted((s["label"], s["source"], s["steps"]) for s in status["step_sources"])
        if "step_sources" in status else None,
        "sources": [(s.get("label"), s.get("rank"), s.get("program")) for s in ingest],
        "connected": sum(1 for s in ingest if s.get("connected")),
        "alerts": [(h["rule"], h["state"]) for h in alerts.get("history", [])],
    }


def liveprof_counts(obs, ranks):
    """liveprof's steps per rank, from the Pod page: {rank: steps}. With one
    rank, its one worker, whatever its label (host:pid); with several, the
    workers labelled "rank R"."""
    if ranks == 1:
        return {0: obs["workers"][0][1]} if len(obs["workers"]) == 1 else {}
    counts = {}
    for label, steps, _, _, _ in obs["workers"]:
        m = re.fullmatch(r"rank (\d+)", label)
        if m:
            counts[int(m.group(1))] = steps
    return counts


def check(obs, tags, job):
    """The reasons liveprof's numbers are not the job's (empty: all hold)."""
    why = []
    ranks = tags["ranks"]
    got = liveprof_counts(obs, ranks)
    if tags["steps"] == 0:
        if obs["workers"]:
            why.append("Pod workers %s for a job with no optimizer step" % obs["workers"])
        if obs["steps_total"] or obs["step_numbers"]:
            why.append("%s steps (%s) for a job with no optimizer step" % (obs["steps_total"], obs["step_numbers"][:5]))
        if obs["step_source"] not in (None, "none"):
            why.append("step_source %r for a job with no optimizer step" % obs["step_source"])
        if obs["step_sources"]:
            why.append("/api/status step_sources %s for a job with no optimizer step" % obs["step_sources"])
        return why
    if got != job:
        why.append("steps per rank %s, the job's %s" % (fmt_counts(got), fmt_counts(job)))
    if len(obs["workers"]) != ranks:
        why.append("Pod workers %s, not the job's %d rank(s)" % ([w[0] for w in obs["workers"]], ranks))
    for label, steps, first, last, source in obs["workers"]:
        if steps and steps <= 100 and last - first + 1 != steps:
            why.append("%s: steps %d..%d for %d steps" % (label, first, last, steps))
        if source is not None and source != "optimizer":
            why.append("%s: step_source %r, not the optimizer's" % (label, source))
    if obs["step_sources"] is not None:
        per_process = {label: (source, steps) for label, source, steps in obs["step_sources"]}
        want = {w[0]: ("optimizer", w[1]) for w in obs["workers"]}
        if per_process != want:
            why.append("/api/status step_sources %s, not each Pod worker's optimizer steps" % obs["step_sources"])
    if ranks == 1:
        n = job.get(0, tags["steps"])
        if obs["steps_total"] != n:
            why.append("/api/steps steps_total %s, the job's %d" % (obs["steps_total"], n))
        if obs["step_numbers"] != list(range(n)):
            nums = obs["step_numbers"]
            why.append("/api/steps rows: %d, steps %s, not 0..%d (the first and the last included)"
                       % (len(nums), span(nums), n - 1))
        if obs["steps_closed"] != n:
            why.append("/api/status steps_closed %s, the job's %d" % (obs["steps_closed"], n))
    if tags["alert"]:
        states = [s for rule, s in obs["alerts"] if rule == tags["alert"]]
        if "firing" not in states or states[-1] != "resolved":
            why.append("%s: %s, not firing then resolved" % (tags["alert"], states or "never fired"))
    return why


def span(nums):
    if not nums:
        return "none"
    runs, start = [], nums[0]
    for a, b in zip(nums, nums[1:] + [None]):
        if b != a + 1:
            runs.append("%d" % start if start == a else "%d-%d" % (start, a))
            start = b
    return ",".join(runs)


def fmt_counts(counts):
    if set(counts) <= {0} and len(counts) <= 1:
        return str(counts.get(0, "none"))
    return "{%s}" % ", ".join("%d: %d" % kv for kv in sorted(counts.items())) if counts else "none"


def run_one(args, script):
    name = os.path.splitext(os.path.basename(script))[0]
    tags = tags_of(script)
    result = {"name": name, "job": "?", "liveprof": "?", "wall": 0.0, "ok": False, "why": [], "log": [],
              "obs": None}
    t0 = time.monotonic()
    run = None
    try:
        run = Run(args.liveprof, script, args.device)
        m = run.wait_for(JOB_END, JOB_DEADLINE_S)
        job_wall = time.monotonic() - t0
        status = int(m.group(2) or m.group(3))
        job, dupes = job_counts(run.log)
        result["job"] = fmt_counts(job)
        # The corpus itself: the job did what its tags say.
        want = {r: tags["steps"] for r in range(tags["ranks"])}
        if job != want or dupes:
            result["why"].append("the job printed %s%s, its tags say %s"
                                 % (fmt_counts(job), " (ranks %s twice)" % dupes if dupes else "", fmt_counts(want)))
        if status != tags["exit"]:
            result["why"].append("the job's exit status %d, its tags say %d" % (status, tags["exit"]))
        # liveprof's numbers, until they are the job's or stand still.
        deadline = time.monotonic() + SETTLE_DEADLINE_S
        last, still_since = None, time.monotonic()
        while True:
            obs = observe(run)
            why = check(obs, tags, job)
            if not why:
                break
            key = (obs["workers"], obs["steps_total"], obs["step_numbers"], obs["alerts"], obs["connected"])
            if key != last:
                last, still_since = key, time.monotonic()
            now = time.monotonic()
            if now > deadline or (obs["connected"] == 0 and now - still_since >= STILL_S):
                break
            time.sleep(0.25)
        result["obs"] = obs
        result["liveprof"] = fmt_counts(liveprof_counts(obs, tags["ranks"])) if tags["steps"] else \
            str(obs["steps_total"] or 0)
        result["why"] += why
        run.proc.send_signal(signal.SIGINT)  # (while lingering: it ends at once, with the job's status)
        rc = run.wait(30)
        if rc != status:
            result["why"].append("liveprof run exited %d, the job %d" % (rc, status))
        result["wall"] = job_wall
    except Exception as e:  # (AssertionError, a REST call that failed, an answer without a field: this script's FAIL)
        result["why"].append("%s: %s" % (type(e).__name__, e))
        result["wall"] = time.monotonic() - t0
    finally:
        if run is not None:
            run.kill()
            result["log"] = run.log
    result["ok"] = not result["why"]
    result["total"] = time.monotonic() - t0
    with print_lock:
        print("%-32s job %-12s liveprof %-12s %5.1f s  %s" % (name, result["job"], result["liveprof"], result["wall"],
                                                             "PASS" if result["ok"] else "FAIL"), flush=True)
        for w in result["why"]:
            print("    " + w, flush=True)
        if (args.verbose or not result["ok"]) and result["obs"] is not None:
            o = result["obs"]
            print("    (Pod %s; step_source %s; step_sources %s; sources %s)" % (
                o["workers"], o["step_source"], o["step_sources"], o["sources"]), flush=True)
        if args.verbose or (not result["ok"] and result["obs"] is None):
            for line in (result["log"] if args.verbose else result["log"][-30:]):
                print("    | " + line, flush=True)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--liveprof", default=os.path.join(HERE, "..", "..", "build", "bin", "liveprof"),
                    help="the liveprof command (default: build/bin/liveprof)")
    ap.add_argument("--only", metavar="NAME_REGEX", help="run only the scripts whose name matches (re.search)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="passed to each script; with cuda, scripts tagged cuda=no are skipped")
    ap.add_argument("--jobs", type=int, default=2, help="scripts run at once (default 2)")
    ap.add_argument("--python", default=PYTHON,
                    help="the Python that runs the scripts (default %s: Debian's, with its torch)" % PYTHON)
    ap.add_argument("-v", "--verbose", action="store_true", help="print each run's output")
    args = ap.parse_args()
    args.liveprof = os.path.abspath(args.liveprof)
    globals()["PYTHON"] = args.python  # (read by Run)
    if not os.access(args.liveprof, os.X_OK):
        raise SystemExit("no liveprof command at %s (--liveprof)" % args.liveprof)
    scripts = sorted(glob.glob(os.path.join(CORPUS, "*.py")))
    if args.only:
        scripts = [s for s in scripts if re.search(args.only, os.path.basename(s))]
    if args.device == "cuda":
        skipped = [s for s in scripts if not tags_of(s)["cuda"]]
        scripts = [s for s in scripts if tags_of(s)["cuda"]]
        for s in skipped:
            print("%-32s skipped (cuda=no)" % os.path.basename(s))
    if not scripts:
        raise SystemExit("no corpus script to run")
    for s in scripts:
        tags_of(s)  # (a script without tags stops the run before anything starts)
    print("corpus: %d scripts under %s run, %d at a time, --device %s" % (len(scripts), args.liveprof, args.jobs,
                                                                         args.device), flush=True)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda s: run_one(args, s), scripts))
    failed = [r["name"] for r in results if not r["ok"]]
    print("corpus: %d passed, %d failed of %d in %.0f s%s" % (
        len(results) - len(failed), len(failed), len(results), time.monotonic() - t0,
        ": " + " ".join(failed) if failed else ""), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
