"""The liveprof command line from Python: `python -m liveprof ...` and the
`liveprof` command that `pip install` puts in the environment's bin/ (its
console script, main()). Both run the C++ program in this process's place
(execv), with the same arguments, exit status and signals:

    liveprof run -- python train.py
    python -m liveprof serve --port 0

The program is the one installed inside this package, liveprof/bin/liveprof
(setup.py copies it there, with the dashboard's files in liveprof/static, the
bootstrap of `liveprof run` in liveprof/bootstrap and what it links beyond
the system's libraries in liveprof/lib). With the package of a build tree
(PYTHONPATH=<build>/python), it is that build's <build>/bin/liveprof.
"""

import os
import sys


def executable():
    """The path of the liveprof program that goes with this package, or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "bin", "liveprof")]  # installed (pip)
    build = os.path.normpath(os.path.join(here, os.pardir, os.pardir))
    if os.path.isfile(os.path.join(build, "CMakeCache.txt")):  # <build>/python/liveprof
        candidates.append(os.path.join(build, "bin", "liveprof"))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def main():
    path = executable()
    if path is None:
        sys.stderr.write("liveprof: the liveprof program is not installed with this package (%s): "
                         "install it with `pip install .` from the source tree, or build it "
                         "(cmake --build build --target liveprof)\n" % os.path.dirname(os.path.abspath(__file__)))
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(path, ["liveprof"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("liveprof: cannot run %s: %s\n" % (path, e))
        return 126


if __name__ == "__main__":
    sys.exit(main())
