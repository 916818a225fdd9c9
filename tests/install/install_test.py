"""liveprof installed and used from another project.

`cmake --install BUILD --prefix TMP/prefix`, then tests/install/consumer (a
CMake project outside the tree: find_package(liveprof), liveprof::producers
and liveprof::ingest_client) configured and built against TMP/prefix alone,
and run with LIVEPROF_SERVER pointing at `liveprof serve`. It holds when:

  - the package installs the host API's and the sender's headers, the wire's
    generated header, the five static libraries and the CMake package;
  - the consumer compiles with no path into the source or build tree, and a
    version the package does not offer is refused;
  - every event it recorded was delivered (it says so, exit 0), and the
    server has its 20 steps (/api/steps: 0..19, the last one too), each
    waiting ~4 ms of ~6 ms for its input (/api/input_pipeline). The
    consumer disconnects with the defaults (a 2 s wait for the
    acknowledgements): a stopping sender's batches are acknowledged at once
    (IngestBatch.stopping).

    /usr/bin/python3 tests/install/install_test.py --liveprof build/bin/liveprof --build build
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from liveprof_server import Server, fail  # noqa: E402  (tests/python/liveprof_server.py)

STEPS = 20


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kw)
    if r.returncode != 0:
        fail("%s: exit %d\n%s%s" % (" ".join(argv), r.returncode, r.stdout[-4000:], r.stderr[-4000:]))
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--liveprof", required=True)
    ap.add_argument("--build", required=True, help="the configured and built liveprof build folder")
    args = ap.parse_args()
    build = os.path.abspath(args.build)

    with tempfile.TemporaryDirectory(prefix="liveprof-install-") as tmp:
        prefix = os.path.join(tmp, "prefix")
        run(["cmake", "--install", build, "--prefix", prefix])
        for path in ["include/liveprof/producers/host_api.h", "include/liveprof/ingest/global_sender.h",
                     "include/liveprof/stream/liveprof_generated.h", "lib/libliveprof_producers.a",
                     "lib/libliveprof_ingest_client.a", "lib/cmake/liveprof/liveprofConfig.cmake",
                     "lib/cmake/liveprof/liveprofConfigVersion.cmake", "lib/cmake/liveprof/liveprofTargets.cmake"]:
            if not os.path.exists(os.path.join(prefix, path)):
                fail("cmake --install did not install %s" % path)

        consumer = os.path.join(tmp, "consumer")
        run(["cmake", "-S", os.path.join(HERE, "consumer"), "-B", consumer, "-G", "Ninja",
             "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_PREFIX_PATH=" + prefix])
        run(["cmake", "--build", consumer])
        with open(os.path.join(consumer, "compile_commands.json")) as f:
            for c in json.load(f):
                for tree in (ROOT + "/src", build):
                    if tree in c["command"]:
                        fail("the consumer compiles with %s: %s" % (tree, c["command"]))

        # A version the package does not offer is refused, by name.
        r = subprocess.run(["cmake", "-S", os.path.join(HERE, "consumer"), "-B", os.path.join(tmp, "too_new"),
                            "-G", "Ninja", "-DCMAKE_PREFIX_PATH=" + prefix, "-DLIVEPROF_WANT_VERSION=9.0"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 0 or "liveprof" not in r.stderr or "9.0" not in r.stderr:
            fail("find_package(liveprof 9.0) was not refused by name:\n" + r.stdout[-2000:] + r.stderr[-2000:])

        server = Server(args.liveprof, tmp)
        try:
            env = dict(os.environ, LIVEPROF_SERVER="unix:" + server.sock)
            out = run([os.path.join(consumer, "consumer"), str(STEPS)], env=env)
            if "consumer: %d steps" % STEPS not in out or " 0 lost" not in out:
                fail("the consumer says: " + out)
            deadline = time.monotonic() + 30
            while True:
                steps = server.get("/api/steps?last=100")
                numbers = [r["step"] for r in steps["rows"]]
                if len(numbers) >= STEPS or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            # Every step, the last included: it closes once the server's
            # clock is past its end by the close lag (steps.h), with no
            # successor to close it.
            if numbers != list(range(STEPS)):
                fail("the server's steps: %s (wanted 0..%d)" % (numbers, STEPS - 1))
            ip = server.get("/api/input_pipeline")
            pct = ip["bottleneck"]["input_pct"]
            if not 40 <= pct <= 80:
                fail("input is %.1f %% of the consumer's steps (4 ms of ~6 ms wanted)" % pct)
            print("install: %d files under %s; the consumer built against it alone; %s; the server has steps %d..%d,"
                  " input %.1f %%" % (sum(len(f) for _, _, f in os.walk(prefix)), "prefix", out.strip(), numbers[0],
                                       numbers[-1], pct))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
