#!/usr/bin/env python3
"""Side by side: a process-level benchmark of this checkout against the same of a base commit.

The process-level counterpart of ../shared/tools/bench-vs: one of the
bench programs (ingest_bench, web_feed_bench, fleet_bench), built at BASE and here,
run alternately, each run's output parsed into named figures, and per figure the
median of the rounds, the spread, new/base and a verdict.

  python3 bench/process_vs.py BASE --bench NAME [--args "FLAGS"] [--rounds N]
                              [--base-build DIR] [--jobs N] [--no-build] [--save DIR]
                              [--markdown]

  e.g. python3 bench/process_vs.py ceff65c --bench ingest_bench --args "--senders 8 --rate 500000"
       python3 bench/process_vs.py ceff65c --bench web_feed_bench --args "--clients 100 --rate 1000000"

BASE is any revision. Its bench program is built once, in Release, in a clone under
$TMPDIR/process-vs/<sha> (kept for the next call), or in --base-build DIR (an existing
build folder of BASE, bench-vs's for one: the missing targets are built there). This
checkout's is built in build/ when build/ is Release (under flock
/tmp/liveprof-build.lock, as the other engineers build there), else in build-release/.
Builds use --jobs (default 2) jobs. Each round runs both, base first in odd rounds and
new first in even ones (A B B A: a drift of the machine's speed lands on both).

new/base is oriented so that > 1 is better: costs and latencies (CPU, ms, MiB) are
inverted, rates compared as rates. "slower" and "faster" need the two ranges not to
overlap and a 3 % difference; anything else is "same". Figures that must hold a value
(events lost = 0) are shown, not ratio'd: "ok" when every new run holds it, else
"MISS". Figures marked "info" get a ratio and no verdict: the bench's own threads'
CPU (oriented as a cost) and sizes ("info (new/base as is)": bytes delivered, views).
Each run's load is shown: the machine's busy cores during the run less the bench's
own (its process tree), i.e. what others used.

Exit status: 1 when a figure is slower or a must-hold figure is missed, 2 on a usage
or build error (BASE without the bench program included), else 0.
"""
import argparse
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCHES = ("ingest_bench", "web_feed_bench", "fleet_bench")

# Orientation of a figure: "higher" (a rate), "lower" (a cost or a latency),
# ("equal", value): must hold value; and with no verdict: "info cost" (new/base
# inverted, as a cost's: the bench's own threads) and "info" (new/base as it is:
# sizes, where neither way is better).
HIGHER, LOWER, INFO_COST, INFO = "higher", "lower", "info cost", "info"


def must_be(value):
    return ("equal", value)


class Figures:
    """Named figures in the order they were added: name -> (value, unit, orientation)."""

    def __init__(self):
        self.items = {}

    def add(self, name, value, unit, orient):
        self.items[name] = (float(value), unit, orient)

    def __contains__(self, name):
        return name in self.items

    def __getitem__(self, name):
        return self.items[name][0]

    def __len__(self):
        return len(self.items)


NUM = r"(-?[\d.]+(?:e[+-]?\d+)?)"


def _search(pattern, text):
    return re.search(pattern, text, re.MULTILINE)


def _thread_lines(text):
    """`  thread TID COMM LABEL PCT%` lines (web_feed_bench, ingest_bench).
    COMM is at most 15 characters and may hold spaces; it is printed %-16s, the label
    %-14s: columns, not words."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^  thread (\d+)\s+(.*?)\s*([\d.]+)%\s*$", line)
        if not m:
            continue
        rest = m.group(2)
        comm, label = rest[:16].strip(), rest[16:].strip()
        out.append((int(m.group(1)), comm, label, float(m.group(3))))
    return out


# The bench's own threads in web_feed_bench (its labels), not liveprof's.
WEB_FEED_BENCH_OWN = ("main (bench)", "sim producer", "bench clients")


def parse_web_feed_bench(text):
    f = Figures()
    m = _search(r"^cpu\s+web thread " + NUM + r"% of one core; process " + NUM + "%", text)
    threads = _thread_lines(text)
    if threads:
        ours = [t for t in threads if t[2] not in WEB_FEED_BENCH_OWN]
        f.add("liveprof threads (all but the bench's own)", sum(t[3] for t in ours), "% core", LOWER)
        f.add("pipeline threads (pipeline + drain)", sum(t[3] for t in threads if t[2] == "pipeline"), "% core", LOWER)
    if m:
        f.add("web thread", m.group(1), "% core", LOWER)
        f.add("process", m.group(2), "% core", INFO_COST)
    # Each thread on its own: by label and name (the base's pipeline thread was
    # unnamed; the label is the bench's, by when the thread appeared).
    per = {}
    for _, comm, label, pct in threads:
        key = f"thread {label or '(unlabelled)'}: {comm}"
        per[key] = per.get(key, 0.0) + pct
    for key, pct in per.items():
        own = any(key.startswith(f"thread {o}:") for o in WEB_FEED_BENCH_OWN)
        f.add(key, pct, "% core", INFO_COST if own else LOWER)
    m = _search(r"^latency\s+event end -> frame written: p50 " + NUM + r" ms, p99 " + NUM + r" ms, max " + NUM, text)
    if m:
        f.add("feed latency p50", m.group(1), "ms", LOWER)
        f.add("feed latency p99", m.group(2), "ms", LOWER)
        f.add("feed latency max", m.group(3), "ms", LOWER)
    m = _search(r"^ingest\s+" + NUM + r" M events/s achieved \((\d+) events in [\d.]+ s\), (\d+) dropped", text)
    if m:
        f.add("ingest achieved", m.group(1), "M ev/s", HIGHER)
        f.add("ingest dropped", m.group(3), "events", must_be(0))
    m = _search(r"^feed\s+" + NUM + r" frames/s, " + NUM + r" MB/s delivered.*; (\d+) of (\d+) clients closed", text)
    if m:
        f.add("feed frames", m.group(1), "frames/s", HIGHER)
        f.add("feed bytes", m.group(2), "MB/s", INFO)
        f.add("clients closed", m.group(3), "clients", must_be(0))
    m = _search(r"^pipeline\s+\d+ publications.*?: p50 " + NUM + r" ms, p99 " + NUM + r" ms", text)
    if m:
        f.add("publication lag p99", m.group(2), "ms", LOWER)
    m = _search(r"^render\s+p50 " + NUM + r" ms, p99 " + NUM + r" ms.*; views " + NUM + r" KB first, " + NUM +
                " KB last", text)
    if m:
        f.add("render p50", m.group(1), "ms", LOWER)
        f.add("views (last publication)", m.group(4), "KB", INFO)
    return f


def parse_ingest_bench(text):
    f = Figures()
    m = _search(r"^steady: " + NUM + r" M events/s into the server, its CPU " + NUM + r" cores = " + NUM +
                r" cores per 1 M events/s", text)
    if m:
        f.add("server CPU per 1 M events/s", m.group(3), "cores", LOWER)
        f.add("server CPU", m.group(2), "cores", LOWER)
        f.add("steady rate into the server", m.group(1), "M ev/s", HIGHER)
    # (ceff65c counted each cause again on top of the difference: its total may
    # be larger for one loss; 0 is 0 in both)
    m = _search(r"^(?:PASS|MISS): 0 events lost \((\d+) lost\)", text)
    if m:
        f.add("events lost", m.group(1), "events", must_be(0))
    m = _search(r"^lost: sender rings (\d+), unacknowledged (\d+) \(\+(\d+) dropped\), server rings (\d+), "
                r"lost batches (\d+)", text)
    if m:
        f.add("sender ring drops", m.group(1), "events", must_be(0))
        f.add("server ring drops", m.group(4), "events", must_be(0))
    m = _search(r"^pipeline: \d+ publications, stream dropped (\d+)", text)
    if m:
        f.add("stream dropped", m.group(1), "events", must_be(0))
    # Per thread (this checkout's ingest_bench; ceff65c's prints none), summed by name.
    per = {}
    for _, comm, _label, pct in _thread_lines(text):
        per[comm] = per.get(comm, 0.0) + pct
    for comm, pct in per.items():
        f.add(f"thread {comm}", pct, "% core", LOWER)
    m = _search(r"^trace store: \d+ events in " + NUM + r" MiB \(" + NUM + " bytes each\)", text)
    if m:
        f.add("trace store per event", m.group(2), "bytes", LOWER)
    m = _search(r"^malloc: " + NUM + r" MiB in use", text)
    if m:
        f.add("malloc in use", m.group(1), "MiB", LOWER)
    return f


def parse_fleet_bench(text):
    f = Figures()
    m = _search(r"^  view: " + NUM + r" summaries/s applied \(offered (\d+)\), lag step end -> render p50 " + NUM +
                r" ms, p99 " + NUM + r" ms, max " + NUM + " ms", text)
    if m:
        f.add("view lag p50", m.group(3), "ms", LOWER)
        f.add("view lag p99", m.group(4), "ms", LOWER)
        f.add("view lag max", m.group(5), "ms", LOWER)
        f.add("summaries applied", m.group(1), "/s", HIGHER)
    m = _search(r"^  view: CPU " + NUM + r" % of a core, peak RSS " + NUM + r" MiB, render " + NUM + r" ms", text)
    if m:
        f.add("view CPU", m.group(1), "% core", LOWER)
        f.add("view peak RSS", m.group(2), "MiB", LOWER)
        f.add("view render (last)", m.group(3), "ms", LOWER)
    m = _search(r"^  nats-server: CPU " + NUM + r" % of a core, RSS " + NUM + " MiB", text)
    if m:
        f.add("nats-server CPU", m.group(1), "% core", INFO_COST)
        f.add("nats-server RSS", m.group(2), "MiB", INFO_COST)
    m = _search(r"^  agents: CPU " + NUM + r" % of a core for \d+ ranks: " + NUM + r" % of a core per rank; (\d+) "
                r"windows resent", text)
    if m:
        f.add("agents CPU", m.group(1), "% core", LOWER)
        f.add("agents CPU per rank", m.group(2), "% core", LOWER)
        f.add("windows resent", m.group(3), "windows", INFO_COST)
    m = _search(r"^  summaries: (\d+) published, (\d+) dropped, (\d+) unsent; the view holds (\d+), (\d+) missing, "
                r"(\d+) twice", text)
    if m:
        f.add("summaries dropped", m.group(2), "summaries", must_be(0))
        f.add("summaries unsent", m.group(3), "summaries", must_be(0))
        f.add("summaries not held", int(m.group(1)) - int(m.group(4)), "summaries", must_be(0))
        f.add("summaries missing", m.group(5), "summaries", must_be(0))
        f.add("summaries twice", m.group(6), "summaries", must_be(0))
    return f


PARSERS = {"ingest_bench": parse_ingest_bench, "web_feed_bench": parse_web_feed_bench,
           "fleet_bench": parse_fleet_bench}
# A run whose output lacks this figure failed: its output is shown, exit 2.
KEY_FIGURE = {"ingest_bench": "server CPU per 1 M events/s",
              "web_feed_bench": "feed latency p99",
              "fleet_bench": "view lag p99"}


# ---- The table ----

def compare(base, new, orient):
    """(ratio or None, verdict) for one figure's base and new values (lists)."""
    mb, mw = statistics.median(base), statistics.median(new)
    if isinstance(orient, tuple):  # must hold a value
        return None, "ok" if all(v == orient[1] for v in new) else "MISS"
    higher = orient in (HIGHER, INFO)
    num, den = (mw, mb) if higher else (mb, mw)
    if num == den:
        ratio = 1.0
    elif den == 0:
        ratio = float("inf")
    else:
        ratio = num / den
    if orient == INFO:
        return ratio, "info (new/base as is)"
    if orient == INFO_COST:
        return ratio, "info"
    if orient == HIGHER:
        worse, better = max(new) < min(base), min(new) > max(base)
    else:
        worse, better = min(new) > max(base), max(new) < min(base)
    verdict = "slower" if worse and ratio < 0.97 else "faster" if better and ratio > 1.03 else "same"
    return ratio, verdict


def fmt(v):
    if v == float("inf"):
        return "inf"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suf}"
    return f"{v:.3g}"


def table(base_runs, new_runs):
    """Rows (name, unit, base cell, new cell, ratio cell, verdict) and the count of
    slower or missed figures. Figures in the order the new output gives them, then
    those only the base gives."""
    names = []
    for runs in (new_runs, base_runs):
        for r in runs:
            for n in r.items:
                if n not in names:
                    names.append(n)
    rows, bad = [], 0
    for n in names:
        b = [r[n] for r in base_runs if n in r]
        w = [r[n] for r in new_runs if n in r]
        unit, orient = next(r.items[n][1:] for r in new_runs + base_runs if n in r)
        cell = lambda v: f"{fmt(statistics.median(v))} [{fmt(min(v))}-{fmt(max(v))}]" if v else "—"
        if isinstance(orient, tuple):
            ratio, verdict = compare(b or [orient[1]], w, orient) if w else (None, "only in base")
            rows.append((n, unit, cell(b), cell(w), f"must be {fmt(orient[1])}", verdict))
            bad += verdict == "MISS"
            continue
        if not b or not w:
            rows.append((n, unit, cell(b), cell(w), "—", "only in " + ("new" if w else "base")))
            continue
        ratio, verdict = compare(b, w, orient)
        bad += verdict == "slower"
        rows.append((n, unit, cell(b), cell(w), "inf" if ratio == float("inf") else f"{ratio:.2f}", verdict))
    return rows, bad


def print_table(rows, markdown, out=sys.stdout):
    head = ("figure", "unit", "base median [min-max]", "new median [min-max]", "new/base", "verdict")
    if markdown:
        out.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
        for r in rows:
            out.write("| " + " | ".join(r) + " |\n")
        return
    w = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        out.write("  ".join(str(c).ljust(w[i]) if i < 5 else str(c) for i, c in enumerate(r)).rstrip() + "\n")


# ---- Building and running ----

def die(msg):
    sys.stderr.write(f"process-vs: {msg}\n")
    sys.exit(2)


def sh(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        die(f"{' '.join(cmd)} failed in {cwd or '.'}\n{(r.stdout or '')[-3000:]}")
    return (r.stdout or "").strip()


def is_release(build_dir):
    cache = os.path.join(build_dir, "CMakeCache.txt")
    return os.path.exists(cache) and "CMAKE_BUILD_TYPE:STRING=Release" in open(cache).read()


def cache_value(build_dir, key):
    for line in open(os.path.join(build_dir, "CMakeCache.txt")):
        if line.startswith(key + ":"):
            return line.split("=", 1)[1].strip()
    return None


def has_target(src, target):
    path = os.path.join(src, "bench", "CMakeLists.txt")
    return os.path.exists(path) and re.search(r"add_executable\(\s*" + re.escape(target) + r"\b", open(path).read())


def binary(build_dir, target):
    for sub in ("bin", "bench", "."):
        exe = os.path.join(build_dir, sub, target)
        if os.access(exe, os.X_OK):
            return exe
    return None


def build(src, build_dir, target, jobs, lock=None, skip=False):
    if not skip:
        if not is_release(build_dir):
            gen = ["-G", "Ninja"] if shutil.which("ninja") else []
            sh(["cmake", "-S", src, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", *gen])
        cmd = ["cmake", "--build", build_dir, "-j", str(jobs), "--target", target]
        if lock and shutil.which("flock"):
            cmd = ["flock", lock] + cmd
        sh(cmd)
    exe = binary(build_dir, target)
    if not exe:
        die(f"no {target} binary under {build_dir}" + (" (--no-build: build it first)" if skip else ""))
    return exe


def busy_jiffies():
    """The machine's busy CPU time (s) from /proc/stat's first line (None off Linux)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_once(exe, args, cwd, timeout):
    """(output, exit status, wall s, others' cores: busy cores less the bench's tree's)."""
    busy0, own0, t0 = busy_jiffies(), children_cpu(), time.monotonic()
    try:
        r = subprocess.run([exe, *args], cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
        out, rc = r.stdout, r.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), 124
    wall = time.monotonic() - t0
    busy1, own1 = busy_jiffies(), children_cpu()
    others = None if busy0 is None else max(0.0, ((busy1 - busy0) - (own1 - own0)) / wall)
    return out, rc, wall, others


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", help="the base revision (any git revision)")
    ap.add_argument("--bench", choices=BENCHES, required=True)
    ap.add_argument("--args", default="", help='the bench program\'s flags, one string: --args="--senders 8"')
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base-build", help="an existing Release build folder of BASE (its missing targets are built)")
    ap.add_argument("--jobs", type=int, default=2, help="build jobs (default 2: the machine is shared)")
    ap.add_argument("--no-build", action="store_true", help="run the binaries already built")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run (default 600)")
    ap.add_argument("--save", help="folder to write each run's output to")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (bench/RESULTS.md)")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        die("--rounds must be >= 1")
    args = shlex.split(a.args)

    top = sh(["git", "rev-parse", "--show-toplevel"], cwd=os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run(["git", "rev-parse", "--verify", "-q", a.base + "^{commit}"], cwd=top, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        die(f"{a.base} is not a revision of {top}")
    sha = r.stdout.strip()

    if a.base_build:
        base_build = os.path.abspath(a.base_build)
        if not os.path.exists(os.path.join(base_build, "CMakeCache.txt")):
            die(f"--base-build {base_build} holds no CMakeCache.txt")
        if not is_release(base_build):
            die(f"--base-build {base_build} is not a Release build")
        base_src = cache_value(base_build, "CMAKE_HOME_DIRECTORY")
        at = subprocess.run(["git", "rev-parse", "HEAD"], cwd=base_src, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL).stdout.strip()
        if at != sha:
            die(f"--base-build {base_build}: its source {base_src} is at {at[:10] or '?'}, not {sha[:10]}")
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=base_src, text=True,
                               stdout=subprocess.PIPE).stdout.strip()
        if dirty:
            die(f"--base-build {base_build}: its source {base_src} has changes:\n{dirty}")
    else:
        base_src = os.path.join(os.environ.get("TMPDIR", tempfile.gettempdir()), "process-vs", sha)
        base_build = os.path.join(base_src, "build")
        if not os.path.isdir(os.path.join(base_src, ".git")):
            if a.no_build:
                die(f"--no-build, and there is no base clone at {base_src}")
            shutil.rmtree(base_src, ignore_errors=True)
            os.makedirs(os.path.dirname(base_src), exist_ok=True)
            sh(["git", "clone", "-q", "--shared", "--no-checkout", top, base_src])
            sh(["git", "checkout", "-q", sha], cwd=base_src)
            shared = os.path.join(os.path.dirname(top), "shared")
            link = os.path.join(os.path.dirname(base_src), "shared")
            if os.path.isdir(shared) and not os.path.exists(link):
                os.symlink(shared, link)  # what reads ../shared finds it
    if not has_target(base_src, a.bench):
        die(f"the base {sha[:10]} has no {a.bench} (bench/CMakeLists.txt): take a later base for it")

    print(f"process-vs: building {a.bench} (Release) at the base {sha[:10]} in {base_build} and here", flush=True)
    base_exe = build(base_src, base_build, a.bench, a.jobs, skip=a.no_build)
    mine = os.path.join(top, "build" if is_release(os.path.join(top, "build")) else "build-release")
    new_exe = build(top, mine, a.bench, a.jobs, lock="/tmp/liveprof-build.lock", skip=a.no_build)
    head = sh(["git", "rev-parse", "--short", "HEAD"], cwd=top)
    dirty = sh(["git", "status", "--porcelain", "--untracked-files=no"], cwd=top)

    if a.save:
        os.makedirs(a.save, exist_ok=True)
    runs = {"base": [], "new": []}
    loads = []
    sides = {"base": (base_exe, base_src), "new": (new_exe, top)}
    for rnd in range(a.rounds):
        for side in (("base", "new") if rnd % 2 == 0 else ("new", "base")):
            exe, cwd = sides[side]
            out, rc, wall, others = run_once(exe, args, cwd, a.timeout)
            figs = PARSERS[a.bench](out)
            load = "" if others is None else f", others used {others:.2f} cores"
            print(f"process-vs: round {rnd + 1}/{a.rounds}, {side}: exit {rc}, {wall:.0f} s{load}", flush=True)
            if a.save:
                with open(os.path.join(a.save, f"{a.bench}-{rnd + 1}-{side}.txt"), "w") as f:
                    f.write(out)
            if KEY_FIGURE[a.bench] not in figs:
                die(f"{exe} {' '.join(args)} (exit {rc}) printed no {KEY_FIGURE[a.bench]}:\n{out[-3000:]}")
            runs[side].append(figs)
            if others is not None:
                loads.append(others)

    rows, bad = table(runs["base"], runs["new"])
    print(f"\n{a.bench} {' '.join(args)}: base {sha[:10]}, new {head}"
          f"{' + uncommitted changes' if dirty else ''}, {a.rounds} rounds\n")
    print_table(rows, a.markdown)
    if loads:
        print(f"\nothers' load during the runs: {min(loads):.2f}-{max(loads):.2f} cores "
              f"(median {statistics.median(loads):.2f}) of {os.cpu_count()}; "
              f"load average now {open('/proc/loadavg').read().split()[0]}")
    if a.rounds < 3:
        print(f"process-vs: {a.rounds} round(s): one run a side is a range of one; take 3 or more for a verdict")
    print(f"process-vs: {len(rows)} figures, {bad} slower or missed against {sha[:10]}; new/base > 1 is better")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
