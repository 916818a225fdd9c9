"""libliveprof.so's CUDA injection entry point (src/attach/injection.cc),
called as the driver calls it: a process loads the library and calls
InitializeInjection() once, inside its first cuInit. Here the process is a
small Python program (ctypes), CUPTI is the stand-in libcupti
(tests/producers/fake_cupti.cc, LIVEPROF_CUPTI_LIBRARY) and the server a
real `liveprof serve --ingest`:

  - with a server and CUPTI: the kernels the job launches reach the server's
    kernel stats, every one, and the job exits 0;
  - with no CUPTI: the job runs and exits 0, the reason is said once on
    stderr, the host events still arrive;
  - with no server configured, or one that is not there: the job runs and
    exits 0 promptly, the reason said once;
  - a second call does nothing (returns 1 again).

Run with a Python 3 (ctypes only); no GPU.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from liveprof_server import Server  # noqa: E402  (tests/python/liveprof_server.py)

DEADLINE_S = 30
KERNELS = 20
KERNEL_NAME = "liveprof_injected_kernel"

# The job: loads the library as the driver would and calls its entry point
# twice; launches KERNELS kernels through the stand-in CUPTI (if any), and
# records a host step (through the same library's C ABI) so the host side
# is seen too.
JOB = r"""
import ctypes, os, sys, threading, time
fake = ctypes.CDLL(os.environ["FAKE_CUPTI"]) if os.environ.get("FAKE_CUPTI") else None
lib = ctypes.CDLL(os.environ["LIVEPROF_LIB"])
print("InitializeInjection", lib.InitializeInjection(), lib.InitializeInjection(), flush=True)
name = b"%(kernel)s"
if fake is not None:
    fake.fake_cupti_queue_launches(%(n)d, threading.get_native_id(), name)
lib.liveprof_now.restype = ctypes.c_uint64
lib.liveprof_record_step.argtypes = [ctypes.c_int64, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64]
t0 = lib.liveprof_now(); time.sleep(0.01); t1 = lib.liveprof_now()
lib.liveprof_record_step(7, lib.liveprof_intern(b"injected_step", 13), t0, t1)
time.sleep(0.3)
print("job done", flush=True)
""" % {"kernel": KERNEL_NAME, "n": KERNELS}


def fail(msg):
    raise AssertionError(msg)


def run_job(args, env_extra, expect_s=DEADLINE_S):
    env = dict(os.environ)
    for k in ("LIVEPROF_SERVER", "LIVEPROF_CUPTI_LIBRARY", "FAKE_CUPTI"):
        env.pop(k, None)
    env["LIVEPROF_LIB"] = args.library
    env.update(env_extra)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", JOB], env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    if p.returncode != 0:
        fail("the job exited %d (must be 0 whatever liveprof finds)\nstdout:\n%s\nstderr:\n%s"
             % (p.returncode, p.stdout, p.stderr))
    if "InitializeInjection 1 1" not in p.stdout:
        fail("InitializeInjection did not return 1 twice: %r" % p.stdout)
    if took > expect_s:
        fail("the job took %.1f s (liveprof must not hold it up)" % took)
    return p


def kernel_row(server):
    for row in server.get("/api/kernel_stats")["rows"]:
        if row["kernel_name"] == KERNEL_NAME:
            return row
    return None


def poll(what, fn):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    fail("timed out waiting for " + what)


def test_with_server_and_cupti(args, tmp):
    server = Server(args.liveprof, tmp)
    try:
        p = run_job(args, {"LIVEPROF_SERVER": "unix:" + server.sock,
                           "LIVEPROF_CUPTI_LIBRARY": args.fake_cupti, "FAKE_CUPTI": args.fake_cupti})
        if "not traced" in p.stderr or "not sending" in p.stderr:
            fail("the injection said it does not trace:\n" + p.stderr)
        try:
            row = poll("the injected kernels in /api/kernel_stats",
                       lambda: (lambda r: r if r and r["occurrences"] >= KERNELS else None)(kernel_row(server)))
        except AssertionError:
            st = server.get("/api/status")
            ks = server.get("/api/kernel_stats")
            fail("no %d kernels: kernel stats %r; status: consumed %s, dropped %s, diagnostics %r\n"
                 "job stderr:\n%s\nserver:\n%s"
                 % (KERNELS, {k: ks[k] for k in ("kernel_count", "rows")},
                    st["events_consumed"], st["events_dropped"],
                    {d["name"]: d["count"] for d in st["diagnostics"] if d["count"]}, p.stderr,
                    "\n".join(server.log)))
        if row["occurrences"] != KERNELS:
            fail("kernel count %d, launched %d" % (row["occurrences"], KERNELS))
        if "served 1 connections" not in "\n".join(server.log) and server.get("/api/status")["events_consumed"] < KERNELS:
            fail("the job's events did not arrive: %r" % server.get("/api/status"))
        print("ok: with a server and CUPTI: %d of %d kernels in the kernel stats" % (row["occurrences"], KERNELS))
    finally:
        server.stop()


def test_no_cupti(args, tmp):
    server = Server(args.liveprof, tmp)
    try:
        p = run_job(args, {"LIVEPROF_SERVER": "unix:" + server.sock,
                           "LIVEPROF_CUPTI_LIBRARY": os.path.join(tmp, "no-such-libcupti.so")})
        said = [l for l in p.stderr.splitlines() if "GPU activity is not traced" in l]
        if len(said) != 1 or "CUPTI not available" not in said[0] or "no-such-libcupti.so" not in said[0]:
            fail("no CUPTI: expected the reason once on stderr, got:\n" + p.stderr)
        # The host side still arrives: the job's step (the only event any
        # producer sends this server).
        poll("the job's step with no CUPTI", lambda: server.get("/api/status")["events_consumed"] >= 1)
        print("ok: no CUPTI: the job ran, said why once, its host events arrived")
    finally:
        server.stop()


def test_no_server(args, tmp):
    p = run_job(args, {}, expect_s=15)
    said = [l for l in p.stderr.splitlines() if l.startswith("liveprof:")]
    if len(said) != 1 or "LIVEPROF_SERVER is not set" not in said[0]:
        fail("no server configured: expected one line saying so, got:\n" + p.stderr)
    p = run_job(args, {"LIVEPROF_SERVER": "unix:" + os.path.join(tmp, "nobody.sock"),
                       "LIVEPROF_CUPTI_LIBRARY": args.fake_cupti, "FAKE_CUPTI": args.fake_cupti},
                expect_s=15)
    print("ok: no server: the job ran and exited 0 (stderr: %r)" % p.stderr.strip()[:300])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--liveprof", required=True)
    ap.add_argument("--library", required=True)
    ap.add_argument("--fake-cupti", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="liveprof-inject-")
    try:
        test_with_server_and_cupti(args, tmp)
        test_no_cupti(args, tmp)
        test_no_server(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
