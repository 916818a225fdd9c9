"""The fleet end to end, with its faults (ctest "fleet: 3 agents x 4
ranks through nats-server, with an agent killed, the view and the server
restarted"). A real nats-server (Debian's, JetStream, a store folder) on a
free loopback port; 3 agents (`liveprof demo --workers 4 --publish ...`,
host-a, host-b, host-c; host-b's rank 2 the straggler) and `liveprof fleet`.

1. The fleet view names host-b rank 2 as the straggler, and its per-rank
   step times equal each agent's own (/api/pod) for the same steps.
2. A viewport query for host-b through the fleet view (/api/fleet/trace)
   returns what host-b's own /api/trace returns.
3. host-c's agent killed with SIGKILL shows as gone, and back when restarted
   (a new incarnation).
4. The fleet view stopped and started again rebuilds every rank from the
   stream.
5. nats-server stopped and started again (same store): the agents catch up.
6. The agents stopped (SIGTERM): each says how many summaries it published;
   the fleet view has exactly those, with no rank missing a summary or
   holding one twice, and shows the hosts stopped.

Run: python3 fleet_faults_test.py --liveprof BIN (the standard library and
tests/python/liveprof_server.py only).
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from liveprof_server import LISTENING, Proc  # noqa: E402  (tests/python/liveprof_server.py)

NATS_SERVER = "/usr/sbin/nats-server"
JOB = "faults"
HOSTS = ["host-a", "host-b", "host-c"]
GONE_AFTER_S = 3


def fail(msg):
    raise AssertionError(msg)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, f, timeout=30.0, every=0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = f()
            if last:
                return last
        except (OSError, ValueError, KeyError) as e:  # a server not up yet, a view not rendered yet
            last = e
        time.sleep(every)
    fail("timed out waiting for %s (last: %r)" % (what, last))


def get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
        return json.loads(r.read())


def metrics(port):
    """/metrics as text, checked by Debian's promtool (`check metrics`)."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    check = subprocess.run(["/usr/bin/promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    if check.returncode != 0:
        fail("promtool check metrics on port %d: %s%s\n%s" % (port, check.stdout, check.stderr, text[:2000]))
    return text.splitlines()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--liveprof", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="liveprof-fleet-")
    nats_port = free_port()
    url = "nats://127.0.0.1:%d" % nats_port
    procs = []

    def start_nats():
        p = Proc([NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", str(nats_port), "-sd", os.path.join(tmp, "js")],
                 name="nats-server")
        procs.append(p)
        wait_for("nats-server up", lambda: socket.create_connection(("127.0.0.1", nats_port), timeout=1).close() or True)
        return p

    def start_agent(host):
        argv = [args.liveprof, "demo", "--port", "0", "--workers", "4", "--rate", "20000", "--trace-mb", "64",
                "--scenario", "balanced", "--publish", url, "--job", JOB, "--fleet-host", host]
        if host == "host-b":
            argv += ["--straggler", "2"]
        p = Proc(argv, name=host, ready=[LISTENING])
        procs.append(p)
        p.http = p.port
        return p

    def start_fleet():
        p = Proc([args.liveprof, "fleet", "--nats", url, "--job", JOB, "--port", "0",
                  "--gone-after", str(GONE_AFTER_S)], name="fleet", ready=[LISTENING])
        procs.append(p)
        p.http = p.port
        return p

    try:
        nats = start_nats()
        agents = {h: start_agent(h) for h in HOSTS}
        fleet = start_fleet()

        def fleet_view():
            return get(fleet.http, "/api/fleet")

        def ranks_by_host(view):
            out = {}
            for r in view["ranks"]:
                out.setdefault(r["host"], {})[r["label"]] = r
            return out

        # 1. The straggler, by host and rank; every rank stepping.
        def straggler_named():
            v = fleet_view()
            s = [a for a in v["alerts"] if a["rule"] == "straggler"][0]
            enough = len(v["ranks"]) == 12 and all(r["steps"] >= 8 for r in v["ranks"])
            return v if enough and s["state"] == "firing" and s["host"] == "host-b" and s["label"] == "rank 2" else None
        v = wait_for("the straggler alert naming host-b rank 2", straggler_named, timeout=40)
        # Each rank's memory peak came with its steps (the simulated ranks allocate).
        no_mem = [(r["host"], r["label"]) for r in v["ranks"] if r["mem_peak_bytes"] <= 0]
        if no_mem:
            fail("ranks without a memory peak: %s" % no_mem)
        print("straggler:", [a["summary"] for a in v["alerts"] if a["rule"] == "straggler"][0], flush=True)
        # The same, for Prometheus: the fleet view's /metrics and an agent's.
        seen = {}

        def straggler_metric():
            lines = metrics(fleet.http)
            seen["last"] = [l for l in lines if l.startswith(("liveprof_fleet_alert_firing", "liveprof_fleet_ranks"))]
            want = 'liveprof_fleet_alert_firing{rule="straggler",host="host-b",rank="rank 2"} 1'
            if want in lines and "liveprof_fleet_ranks 12" in lines:
                return lines
            raise ValueError("not yet: %s" % seen["last"])
        lines = wait_for("the fleet view's /metrics naming host-b rank 2", straggler_metric, timeout=40)
        for want in ('liveprof_fleet_hosts{state="live"} 3', 'liveprof_fleet_host_state{host="host-b",state="live"} 1',
                     "liveprof_fleet_nats_connected 1"):
            if want not in lines:
                fail("the fleet view's /metrics lacks %r" % want)
        agent_lines = metrics(agents["host-b"].http)
        if "liveprof_fleet_agent_connected 1" not in agent_lines or \
                not any(l.startswith("liveprof_events_consumed_total ") for l in agent_lines):
            fail("host-b's /metrics lacks its agent's or its own families")
        print("/metrics (promtool-checked): the fleet view's names host-b rank 2; the agent's has its own", flush=True)

        # ... and per-rank step times equal each agent's own, step for step:
        # each rank's newest step in the fleet view, found in its agent's pod
        # (which keeps its newest 50 steps up to its slowest rank's last: a
        # host with a rank behind has its faster ranks' newest steps beyond
        # its grid, so ten rounds, one cell at least each), a few rounds apart.
        compared = {h: 0 for h in HOSTS}
        for _ in range(10):
            ranks = fleet_view()["ranks"]
            pods = {h: get(a.http, "/api/pod") for h, a in agents.items()}
            for r in ranks:
                pod = pods[r["host"]]
                wid = [w["id"] for w in pod["workers"] if w["label"] == r["label"]]
                row = [row for row in pod["steps"] if row["step"] == r["last_step"]]
                cell = [c for c in row[0]["cells"] if c["worker"] == wid[0]] if row and wid else []
                if not cell:
                    continue  # (already out of the agent's window)
                compared[r["host"]] += 1
                if abs(cell[0]["step_ms"] - r["last_step_ms"]) > 1e-6:
                    fail("%s %s step %d: the fleet has %r ms, the agent %r" % (
                        r["host"], r["label"], r["last_step"], r["last_step_ms"], cell[0]["step_ms"]))
            time.sleep(0.2)
        for h, n in compared.items():
            if n < 8:
                fail("%s: only %d (rank, step) cells compared" % (h, n))
        print("step times equal each agent's own: %s (rank, step) cells" % compared, flush=True)

        # 2. A viewport query for host-b through the fleet view = host-b's own.
        whole = wait_for("host-b's trace to span 3 s", lambda: (
            lambda w: w if w["t1"] - w["t0"] >= 3_000_000_000 else None)(get(agents["host-b"].http, "/api/trace?width=100")))
        t0, t1 = whole["t0"], whole["t1"]
        query = "t0=%d&t1=%d&width=400" % (t0, t1 - 2_000_000_000)  # a settled past range
        own = get(agents["host-b"].http, "/api/trace?" + query)
        forwarded = get(fleet.http, "/api/fleet/trace?host=host-b&" + query)
        # The store's own totals (events, last_ns) go on growing between the
        # two calls: the later answer has at least as many; the rest is equal.
        for k in ("events", "last_ns"):
            if forwarded.get(k, 0) < own.get(k, 0):
                fail("%s: forwarded %r < own %r" % (k, forwarded.get(k), own.get(k)))
            own.pop(k, None)
            forwarded.pop(k, None)
        if own != forwarded:
            diff = [k for k in set(own) | set(forwarded) if own.get(k) != forwarded.get(k)]
            fail("the forwarded viewport differs from host-b's own /api/trace in %s: %s vs %s" % (
                diff, json.dumps({k: own.get(k) for k in diff})[:600], json.dumps({k: forwarded.get(k) for k in diff})[:600]))
        if not any(t.get("slices") for t in own.get("tracks", [])) and not own.get("tracks"):
            fail("the viewport is empty: %s" % json.dumps(own)[:300])
        print("viewport for host-b through the fleet view = its own (%d bytes)" % len(json.dumps(own)), flush=True)

        # 3. host-c killed: gone; restarted: back, a new incarnation.
        agents["host-c"].kill()
        wait_for("host-c gone", lambda: [h for h in fleet_view()["hosts"] if h["host"] == "host-c"][0]["state"] == "gone",
                 timeout=GONE_AFTER_S + 10)
        print("host-c gone after SIGKILL", flush=True)
        agents["host-c"] = start_agent("host-c")

        def host_c_back():
            h = [h for h in fleet_view()["hosts"] if h["host"] == "host-c"][0]
            return h if h["state"] == "live" and h["agents"] == 2 and h["back_count"] >= 1 else None
        wait_for("host-c back as a new agent", host_c_back, timeout=20)
        wait_for("host-c's ranks stepping again", lambda: all(
            r["incarnations"] == 2 and r["last_seq"] >= 3 for r in ranks_by_host(fleet_view())["host-c"].values()))
        print("host-c back (2 incarnations)", flush=True)

        # 4. The fleet view restarted: every rank rebuilt from the stream.
        before = {(r["host"], r["label"]): r["steps"] for r in fleet_view()["ranks"]}
        fleet.stop(30)
        fleet = start_fleet()

        def rebuilt():
            v = fleet_view()
            now = {(r["host"], r["label"]): r["steps"] for r in v["ranks"]}
            return v if len(now) == 12 and all(now[k] >= before[k] for k in before) else None
        v = wait_for("the restarted fleet view rebuilt from the stream", rebuilt, timeout=30)
        print("fleet view restarted: %d messages read back" % v["counts"]["messages"], flush=True)

        # 5. nats-server stopped and started again: the agents catch up.
        nats.stop(30)
        time.sleep(2)
        outboxes = {h: get(a.http, "/api/fleet/agent")["outbox"] for h, a in agents.items()}
        if not any(n > 0 for n in outboxes.values()):
            fail("no agent held anything while nats-server was away: %s" % outboxes)
        nats = start_nats()
        wait_for("the agents caught up", lambda: all(
            get(a.http, "/api/fleet/agent")["connected"] and get(a.http, "/api/fleet/agent")["outbox"] == 0
            for a in agents.values()), timeout=30)
        print("nats-server restarted; outboxes while away %s, all sent since" % outboxes, flush=True)

        # 6. Stop the agents: what each published is what the view holds.
        published = {}
        for host, a in agents.items():
            a.stop(30)
            m = a.wait_for(r"fleet: (\d+) step summaries published, (\d+) dropped, (\d+) unsent", 5)
            n, dropped, unsent = map(int, m.groups())
            if dropped or unsent:
                fail("%s: %d dropped, %d unsent" % (host, dropped, unsent))
            published[host] = n

        def all_in():
            v = fleet_view()
            by = ranks_by_host(v)
            held = {h: sum(r["last_seq"] for r in by.get(h, {}).values()) for h in HOSTS}
            stopped = all(h["state"] == "stopped" for h in v["hosts"])
            return v if held == published and stopped else None
        v = wait_for("the fleet view to hold every published summary", all_in, timeout=30)
        for r in v["ranks"]:
            if r["missing"] or r["duplicates"]:
                fail("%s %s: %d missing, %d twice" % (r["host"], r["label"], r["missing"], r["duplicates"]))
        c = v["counts"]
        if c["missing_steps"] or c["duplicate_steps"] or sum(c["rejected"].values()):
            fail("counts: %s" % c)
        print("ok: published %s = held by the fleet view; 0 missing, 0 twice; counts %s" % (published, c), flush=True)
    finally:
        for p in procs:
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL:", e, file=sys.stderr)
        sys.exit(1)
