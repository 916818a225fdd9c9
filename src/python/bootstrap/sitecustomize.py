"""liveprof's bootstrap: Python runs this module at start-up (its documented
`sitecustomize` hook) when `liveprof run` put this folder first on
PYTHONPATH (<build>/python/bootstrap, or liveprof/bootstrap in the installed
package). It attaches the process to liveprof run's server with no change
to the program (liveprof._autoattach), then runs the sitecustomize that was
there before ours, if any, so the environment's own start-up still happens.

Nothing here may stop the program: any failure is said once on stderr and
the program runs as without liveprof.
"""


def _load_package():
    # Installed by pip, this folder is liveprof/bootstrap inside the package,
    # and only it is on PYTHONPATH (not the whole site-packages, which would
    # come before the job's standard library): the package it is in, the one
    # that goes with the `liveprof` command that started the job, is loaded
    # by its path, whichever Python runs the job. (In a build tree the
    # package's folder is on PYTHONPATH: nothing to do.)
    import importlib.util
    import os
    import sys
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    init = os.path.join(package, "__init__.py")
    if "liveprof" in sys.modules or os.path.basename(package) != "liveprof" or not os.path.isfile(init):
        return
    spec = importlib.util.spec_from_file_location("liveprof", init, submodule_search_locations=[package])
    module = importlib.util.module_from_spec(spec)
    sys.modules["liveprof"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["liveprof"]
        raise


def _attach():
    import sys
    try:
        _load_package()
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
