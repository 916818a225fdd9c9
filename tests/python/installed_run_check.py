"""`liveprof run` from a pip-installed liveprof (tests/python/pip_install_test.sh):
the command the wheel put in a virtual environment's bin/, run from a folder
outside the source and build trees, must find everything in the installed
package, not in a build tree:

  - a Python job gets the installed bootstrap and package (PYTHONPATH, the
    module's file) and the installed libliveprof.so (LIVEPROF_LIBRARY);
  - the dashboard is the package's copy of static/ (MARKER, written into the
    installed index.html by the caller, is served), uPlot included;
  - an ordinary training script of the corpus (tests/attach/corpus/, a new
    DataLoader each epoch) under it reports every step it made, as it counts
    them (its "CORPUS steps=N" line), and the source is named after it.

    installed_run_check.py VENV_LIVEPROF SITE_PACKAGES EXAMPLE MARKER
"""

import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liveprof_server import Proc, get_json  # noqa: E402

PYTHON = "/usr/bin/python3"  # (Debian's torch imports only there)
DEADLINE_S = 120


def fail(msg):
    raise AssertionError(msg)


def liveprof_run(liveprof, args):
    return Proc([liveprof, "run", "--port", "0", *args])


def check_paths(liveprof, site):
    job = ("import os, liveprof; print('JOB', os.environ['PYTHONPATH'], liveprof.__file__, "
           "os.environ['LIVEPROF_LIBRARY'], os.environ.get('CUDA_INJECTION64_PATH'))")
    with liveprof_run(liveprof, ["--linger", "0", "--", PYTHON, "-c", job]) as run:
        words = run.wait_for(r"^JOB (.*)", DEADLINE_S).group(1).split()
        run.wait_for(r"the job exited with status 0", DEADLINE_S)
    pythonpath, module, library, injection = words
    package = os.path.join(site, "liveprof")
    if pythonpath.split(":")[0] != os.path.join(package, "bootstrap"):
        fail("the job's PYTHONPATH %s does not begin with the installed bootstrap" % pythonpath)
    if site in pythonpath.split(":"):
        fail("the whole site-packages is on the job's PYTHONPATH: %s" % pythonpath)
    if module != os.path.join(package, "__init__.py"):
        fail("the job imported liveprof from %s, not the installed package %s" % (module, package))
    if library != os.path.join(package, "libliveprof.so") or injection != library:
        fail("the job's libliveprof.so is %s (CUDA injection %s), not the installed one" % (library, injection))
    print("ok: a Python job under the installed liveprof run gets the installed bootstrap, package and "
          "libliveprof.so")


def check_training(liveprof, example, marker):
    with liveprof_run(liveprof, ["--linger", "60", "--", PYTHON, example]) as run:
        url = run.wait_url(DEADLINE_S)
        with urllib.request.urlopen(url + "/", timeout=10) as r:
            index = r.read().decode()
        if marker not in index:
            fail("the dashboard served is not the installed package's static/ (no %r in /)" % marker)
        with urllib.request.urlopen(url + "/vendor/uPlot.iife.min.js", timeout=10) as r:
            if r.status != 200 or len(r.read()) < 10000:
                fail("uPlot is not served from the installed package")
        steps = int(run.wait_for(r"CORPUS steps=(\d+)", DEADLINE_S).group(1))  # the job's own count
        run.wait_for(r"the job (exited|killed)", DEADLINE_S)
        if "the job exited with status 0" not in "\n".join(run.log):
            fail("the job failed:\n" + "\n".join(run.log))
        deadline = time.monotonic() + 30
        while True:
            rows = get_json(url + "/api/steps?last=%d" % (2 * steps))["rows"]
            if len(rows) >= steps or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if [r["step"] for r in rows] != list(range(steps)):  # the job's own count, the first and the last
            fail("steps %s reached the server, the job made %d:\n%s" % ([r["step"] for r in rows], steps,
                                                                        "\n".join(run.log)))
        programs = [s["program"] for s in get_json(url + "/api/status")["server"]["ingest"]]
        if os.path.basename(example) not in programs:
            fail("no source named after the script: %s" % programs)
        print("ok: %s under the installed liveprof run: %d of its %d steps in /api/steps, the package's "
              "dashboard served" % (os.path.basename(example), len(rows), steps))


def main():
    liveprof, site, example, marker = sys.argv[1:5]
    check_paths(liveprof, site)
    check_training(liveprof, example, marker)


if __name__ == "__main__":
    main()
