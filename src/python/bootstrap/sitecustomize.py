"""liveprof's bootstrap: Python runs this module at start-up (its documented
`sitecustomize` hook) when `liveprof run` put this folder first on
PYTHONPATH. It attaches the process to liveprof run's server with no change
to the program (liveprof._autoattach), then runs the sitecustomize that was
there before ours, if any, so the environment's own start-up still happens.

Nothing here may stop the program: any failure is said once on stderr and
the program runs as without liveprof.
"""


def _attach():
    import sys
    try:
        from liveprof import _autoattach
        _autoattach.attach()
    except Exception as e:  # noqa: BLE001  (never into the program)
        print("liveprof: this Python process is not instrumented: %s: %s" % (type(e).__name__, e),
              file=sys.stderr)


def _chain():
    # The next sitecustomize on sys.path after this folder (a virtual
    # environment's, a distribution's), run as Python would have run it.
    import importlib.machinery
    import importlib.util
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_attach()
_chain()
