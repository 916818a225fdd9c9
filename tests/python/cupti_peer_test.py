"""A script that profiles itself under liveprof run (src/python/liveprof/
_cupti_peer.py; docs/attach.md, "A script that profiles itself"): the real
libliveprof.so with the stand-in CUPTI (tests/producers/fake_cupti.cc),
whose second client (fake_cupti_peer_*) is Kineto as it drives CUPTI on
CUDA 13.0 / r580. Each scenario runs in a process of its own:

  - torch: Debian's PyTorch 1.13, a torch.profiler.profile with a schedule
    (wait 1, warmup 1, active 2) over 8 steps, CUDA made to look available
    and Kineto's CUPTI calls played by the stand-in's other client (under
    torch.autograd.profiler's _prepare_profiler / _disable_profiler, as
    Kineto runs under them): the other client gets every kernel of steps 1
    to 3 (its window, warmup included), liveprof every kernel of the others,
    none twice; each handoff is an instant at its place; a CPU-only session
    and a session that fails to start change nothing;
  - pending: no tracer yet under CUDA's injection: the one that starts
    inside the other client's window (its first CUPTI call) starts aside,
    and takes CUPTI at its end; without the injection nothing is done;
  - server (with --liveprof): the same window in a process that sends to a
    real `liveprof serve --ingest`: /api/status's gpu_handoffs names it, for
    that process, with its times.

Run: cupti_peer_test.py --library <libliveprof.so> --fake-cupti <libfake_cupti.so>
[--liveprof <liveprof>] (the package from src/python; no GPU).
"""

import argparse
import ctypes
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC_PYTHON = os.path.join(HERE, "..", "..", "src", "python")
PER_STEP = 5  # kernels each step launches.


def fail(msg):
    raise AssertionError(msg)


def check(cond, msg):
    if not cond:
        fail(msg)


class Fake:
    """The stand-in CUPTI's controls (the very library libliveprof loaded)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.fake_cupti_queue_launches.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_char_p]
        self.lib.fake_cupti_peer_kernels.argtypes = [ctypes.c_char_p]
        self.names = []  # (the records point at them: kept alive)

    def launch(self, name, n=PER_STEP):
        b = name.encode()
        self.names.append(b)
        self.lib.fake_cupti_queue_launches(n, 77, b)

    def peer_kernels(self, name):
        return self.lib.fake_cupti_peer_kernels(name.encode())


def drained(native):
    """liveprof's kernels by name and its handoff instants, as recorded."""
    kernels, instants = {}, []
    for e in native._drain_local():
        if e["kind"] == "kernel":
            kernels[e["name"]] = kernels.get(e["name"], 0) + 1
        elif e["kind"] == "instant" and e["name"].startswith("GPU data: "):
            instants.append(e["name"])
    return kernels, instants


def scenario_torch(fake):
    import torch
    import torch.autograd.profiler as ap
    from torch.profiler import ProfilerActivity, schedule

    from liveprof import _cupti_peer, _native as native

    # This machine has no GPU: CUDA is made to look available, so that
    # torch.profiler asks Kineto for CUDA activities as on a GPU machine.
    syncs = []
    torch.cuda.is_available = lambda: True
    torch.cuda.is_initialized = lambda: True
    torch.cuda.synchronize = lambda *a: syncs.append(1)
    cpu_cuda = {ProfilerActivity.CPU, ProfilerActivity.CUDA}
    ap._supported_activities = lambda: cpu_cuda
    # Kineto's CUPTI calls, under the functions torch.autograd.profiler calls.
    real_prepare, real_disable = ap._prepare_profiler, ap._disable_profiler
    kineto = {"on": False}

    def prepare(config, activities):
        r = real_prepare(config, activities)
        if ProfilerActivity.CUDA in activities:
            check(fake.lib.fake_cupti_peer_start(1) == 0, "Kineto's cuptiSubscribe was refused: liveprof holds it")
            kineto["on"] = True
        return r

    def disable():
        r = real_disable()
        if kineto["on"]:
            fake.lib.fake_cupti_peer_stop(0)
            kineto["on"] = False
        return r

    ap._prepare_profiler, ap._disable_profiler = prepare, disable

    running, message = native.gpu_start("default")
    check(running, "the GPU tracer did not start on the stand-in CUPTI: " + message)
    check(_cupti_peer.install(torch, native) is None, "install said a problem")
    check(_cupti_peer.install(torch, native) is None, "a second install said a problem")
    check(ap._prepare_profiler is not prepare and ap._prepare_profiler.__wrapped__ is prepare,
          "torch.autograd.profiler._prepare_profiler is not wrapped (once)")

    # A CPU-only session: no handoff.
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as p:
        (torch.ones(3) + 1).sum()
    check(len(p.key_averages()) > 0, "the CPU-only session recorded nothing")
    check(native.gpu_state() == "tracing", "a CPU-only session moved the tracer: %s" % native.gpu_state())

    # A session whose start fails: the tracer is back at once.
    def refusing(config, activities):
        raise RuntimeError("another profiler is running")
    wrapped_prepare = ap._prepare_profiler
    failing = _cupti_peer._wrap(refusing, ap._enable_profiler, ap._disable_profiler)[0]
    try:
        failing(None, cpu_cuda)
        fail("the refusing prepare did not raise")
    except RuntimeError:
        pass
    check(native.gpu_state() == "tracing", "a failed start left the tracer %s" % native.gpu_state())
    check(ap._prepare_profiler is wrapped_prepare, "the module's wrapper changed")

    # The scheduled session over 8 steps.
    states, windows = [], []

    def on_trace_ready(prof):
        windows.append((len(prof.key_averages()), [fake.peer_kernels("k_step%d" % n) for n in range(8)]))

    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                                on_trace_ready=on_trace_ready) as prof:
        for step in range(8):
            states.append(native.gpu_state())
            fake.launch("k_step%d" % step)
            (torch.ones(3) + step).sum()
            prof.step()
    native.gpu_stop()
    kernels, instants = drained(native)

    check(states == ["tracing", "aside", "aside", "aside", "tracing", "tracing", "tracing", "tracing"],
          "the tracer's state per step: %s" % states)
    check(len(windows) == 1, "on_trace_ready ran %d times" % len(windows))
    events, peer = windows[0]
    check(events > 0, "torch.profiler's trace has no event")
    check(peer == [0, PER_STEP, PER_STEP, PER_STEP, 0, 0, 0, 0],
          "the other client's kernels per step (its window: steps 1-3): %s" % peer)
    check(fake.lib.fake_cupti_peer_unknown_buffers() == 0, "a buffer of liveprof's reached the other client")
    expected = {"k_step%d" % n: PER_STEP for n in (0, 4, 5, 6, 7)}
    check(kernels == expected, "liveprof's kernels: %s, expected %s" % (kernels, expected))
    # (the failed start's brief window, then the session's)
    check(instants == ["GPU data: to torch.profiler", "GPU data: back to liveprof"] * 2,
          "the handoff instants: %s" % instants)
    check(len(syncs) >= 1, "the device was not synchronized before the handoff")
    print("torch: steps 1-3 to torch.profiler (%d kernels), %d to liveprof, handoffs said"
          % (sum(peer), sum(kernels.values())))


def scenario_pending(fake):
    from liveprof import _cupti_peer, _native as native

    calls = []
    torch, prof_mod = torch_stub(native, fake, calls)
    CPU, CUDA = "CPU", "CUDA"
    check(_cupti_peer.install(torch, native) is None, "install said a problem")

    injected = bool(os.environ.get("CUDA_INJECTION64_PATH"))
    check(native.gpu_state() == "none", "a tracer before the window: %s" % native.gpu_state())
    prof_mod._prepare_profiler(None, {CPU, CUDA})
    check(native.gpu_state() == ("aside" if injected else "none"), "in the window: %s" % native.gpu_state())
    prof_mod._enable_profiler(None, {CPU, CUDA})
    fake.launch("k_window")
    prof_mod._disable_profiler()
    check(calls == ["prepare", "enable", "disable"], "calls: %s" % calls)
    check(fake.peer_kernels("k_window") == PER_STEP, "the other client's kernels: %d" % fake.peer_kernels("k_window"))
    if not injected:
        check(native.gpu_state() == "none", "no injection: a tracer appeared (%s)" % native.gpu_state())
        print("pending: without CUDA's injection, nothing done")
        return
    check(native.gpu_state() == "tracing", "after the window: %s" % native.gpu_state())
    fake.launch("k_after")
    native.gpu_stop()
    kernels, instants = drained(native)
    check(kernels == {"k_after": PER_STEP}, "liveprof's kernels: %s" % kernels)
    check(instants == ["GPU data: to torch.profiler", "GPU data: back to liveprof"], "instants: %s" % instants)
    print("pending: the tracer started inside the window started aside, and took CUPTI at its end")


def torch_stub(native, fake, calls):
    """A torch with just what install() and the hooks read; its Kineto
    drives the stand-in's other client. Returns (torch, its profiler module)."""
    import types
    CUDA, CPU = "CUDA", "CPU"
    prof_mod = types.ModuleType("fake_torch.autograd.profiler")

    def prepare(config, activities):
        calls.append("prepare")
        if os.environ.get("CUDA_INJECTION64_PATH") and native.gpu_state() == "pending":
            # Kineto's first CUPTI call: cuInit, where CUDA's injection starts
            # liveprof's tracer, then Kineto's callbacks and kinds.
            running, message = native.gpu_start("default")
            check(running, "the tracer did not start: " + message)
            check(native.gpu_state() == "aside", "a tracer started in the window is %s" % native.gpu_state())
        check(fake.lib.fake_cupti_peer_start(1) == 0, "Kineto's cuptiSubscribe was refused")

    def enable(config, activities):
        calls.append("enable")

    def disable():
        calls.append("disable")
        fake.lib.fake_cupti_peer_stop(0)

    prof_mod._prepare_profiler, prof_mod._enable_profiler, prof_mod._disable_profiler = prepare, enable, disable
    torch = types.SimpleNamespace(
        autograd=types.SimpleNamespace(profiler=prof_mod, ProfilerActivity=types.SimpleNamespace(CPU=CPU, CUDA=CUDA)),
        cuda=types.SimpleNamespace(is_initialized=lambda: False, synchronize=lambda: calls.append("sync")))
    return torch, prof_mod


def scenario_server(fake):
    import time

    from liveprof import _cupti_peer, _native as native

    native.connect(os.environ["PEER_TEST_INGEST"], program="cupti_peer_test")
    running, message = native.gpu_start("default")
    check(running, "the GPU tracer did not start: " + message)
    calls = []
    torch, prof_mod = torch_stub(native, fake, calls)
    check(_cupti_peer.install(torch, native) is None, "install said a problem")
    fake.launch("k_before")
    time.sleep(0.2)
    prof_mod._prepare_profiler(None, {"CPU", "CUDA"})
    prof_mod._enable_profiler(None, {"CPU", "CUDA"})
    fake.launch("k_window")
    time.sleep(0.3)
    prof_mod._disable_profiler()
    fake.launch("k_after")
    time.sleep(0.2)
    native.disconnect(5.0)
    check(fake.peer_kernels("k_window") == PER_STEP, "the other client's kernels: %d" % fake.peer_kernels("k_window"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("--fake-cupti", required=True)
    ap.add_argument("--liveprof")
    ap.add_argument("--scenario")
    args = ap.parse_args()
    if args.scenario:
        sys.path.insert(0, SRC_PYTHON)
        fake = Fake(args.fake_cupti)
        {"torch": scenario_torch, "pending": scenario_pending, "server": scenario_server}[args.scenario](fake)
        return
    base = dict(os.environ)
    for k in ("LIVEPROF_SERVER", "CUDA_INJECTION64_PATH", "LIVEPROF_CUPTI_LEVEL", "LIVEPROF_CUPTI_RECORD"):
        base.pop(k, None)
    base.update(LIVEPROF_LIBRARY=args.library, LIVEPROF_CUPTI_LIBRARY=args.fake_cupti, LIVEPROF_AUTOATTACH="0",
                PYTHONDONTWRITEBYTECODE="1")
    runs = [("torch", {}), ("pending", {"CUDA_INJECTION64_PATH": args.library}), ("pending", {})]
    for scenario, extra in runs:
        env = dict(base, **extra)
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--library", args.library,
                            "--fake-cupti", args.fake_cupti, "--scenario", scenario],
                           env=env, capture_output=True, text=True, timeout=120)
        sys.stdout.write(p.stdout)
        if p.returncode != 0:
            fail("scenario %s %s exited %d:\n%s%s" % (scenario, extra, p.returncode, p.stdout, p.stderr))
    if args.liveprof:
        check_server(args, base)
    print("cupti peer: OK")


def check_server(args, base):
    """The window, sent to a real server, in /api/status's gpu_handoffs."""
    import tempfile
    import time
    sys.path.insert(0, HERE)
    from liveprof_server import Server
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args.liveprof, tmp)
        try:
            env = dict(base, PEER_TEST_INGEST="unix:" + server.sock)
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--library", args.library,
                                "--fake-cupti", args.fake_cupti, "--scenario", "server"],
                               env=env, capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                fail("scenario server exited %d:\n%s%s" % (p.returncode, p.stdout, p.stderr))
            deadline = time.monotonic() + 20
            while True:
                st = server.get("/api/status")
                handoffs = st.get("gpu_handoffs", [])
                if handoffs or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            check(len(handoffs) == 1, "gpu_handoffs: %s" % handoffs)
            h = handoffs[0]
            check(h["client"] == "torch.profiler" and h["note"] == "", "the window: %s" % h)
            check(0 < h["from_ns"] < h["to_ns"] and h["to_s"] is not None and 0 <= h["from_s"] < h["to_s"],
                  "the window's times: %s" % h)
            check(0.25 < (h["to_ns"] - h["from_ns"]) / 1e9 < 10, "the window's length: %s" % h)
            sources = st["server"]["ingest"]
            check(any(s.get("worker") == h["worker"] and s.get("program") == "cupti_peer_test" for s in sources),
                  "no ingest source is worker %s: %s" % (h["worker"], sources))
            print("server: /api/status says GPU data went to torch.profiler from %.3f s to %.3f s (%s)"
                  % (h["from_s"], h["to_s"], h["label"]))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
