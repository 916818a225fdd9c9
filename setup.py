"""Builds the wheel's native files before setuptools packs src/python/liveprof
(pyproject.toml holds everything else): the package the way users install
it, `pip install .` or the wheel, with the whole liveprof command line.

Into the package (site-packages/liveprof/) go, besides its Python files:
  libliveprof.so, _fast.abi3.so  the C ABI the package loads (CMake target
                                 liveprof_python), and the optional span object;
  bin/liveprof                   the command line (target liveprof), which the
                                 `liveprof` console script and `python -m
                                 liveprof` run (liveprof/__main__.py);
  lib/                           what bin/liveprof links beyond a plain Debian
                                 12 with Python: the libraries Debian ships as
                                 .so only (libnats, libprotobuf-c, libsimdjson),
                                 found through its RPATH $ORIGIN/../lib (Boost.URL
                                 and protobuf are linked in statically:
                                 src/app/CMakeLists.txt);
  static/                        the dashboard's files (the source tree's static/,
                                 with vendor/ that scripts/setup.sh fills), found
                                 by bin/liveprof beside itself (src/app/paths.h);
  bootstrap/sitecustomize.py     `liveprof run`'s bootstrap for Python jobs (it
                                 loads the package it is in: src/app/run.cc).

All of it is built in $LIVEPROF_BUILD_DIR (default build/, configured if it is
not) with the project's own CMake build, never downloaded; the build takes
the lock $LIVEPROF_BUILD_LOCK (default /tmp/liveprof-build.lock, flock(1)'s;
empty: none), as every build in a shared tree must. The wheel is tagged
py3-none-<platform>: it holds no extension module for one Python, so one
wheel serves every Python 3.9+.
"""

import fcntl
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # (newer setuptools carry it themselves)
    from setuptools.command.bdist_wheel import bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))

# The libraries bin/liveprof may take from the system it runs on: glibc's, the
# C++ runtime, zlib and OpenSSL (a Debian 12 with Python has them all: Python
# itself needs them). Any other library it links is carried in liveprof/lib/.
SYSTEM_LIBRARIES = {
    "linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2",
    "librt.so.1", "libstdc++.so.6", "libgcc_s.so.1", "libz.so.1", "libssl.so.3", "libcrypto.so.3",
}


def build_dir():
    return os.path.abspath(os.environ.get("LIVEPROF_BUILD_DIR", os.path.join(ROOT, "build")))


def cmake_build(build, targets):
    lock_path = os.environ.get("LIVEPROF_BUILD_LOCK", "/tmp/liveprof-build.lock")
    lock = open(lock_path, "a") if lock_path else None
    try:
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # (released when closed)
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"])
        subprocess.check_call(["cmake", "--build", build, "--target"] + targets)
    finally:
        if lock is not None:
            lock.close()


def carried_libraries(program):
    """{soname: path} of the libraries `program` loads that are not the
    system's (SYSTEM_LIBRARIES); an unresolved one is an error."""
    out = subprocess.run(["ldd", program], check=True, capture_output=True, text=True).stdout
    carried = {}
    for line in out.splitlines():
        words = line.split()
        if not words or words[0] in SYSTEM_LIBRARIES or os.path.basename(words[0]) in SYSTEM_LIBRARIES:
            continue
        if len(words) < 3 or words[1] != "=>" or not words[2].startswith("/"):
            raise RuntimeError("%s: %s is not found (ldd: %s)" % (program, words[0], line.strip()))
        carried[words[0]] = os.path.realpath(words[2])
    return carried


def build_native(target):
    """Builds the native files and copies them, with the dashboard's files
    and the bootstrap, into `target` (the package's folder in build_lib)."""
    build = build_dir()
    cmake_build(build, ["liveprof", "liveprof_python"])
    package = os.path.join(build, "python", "liveprof")
    for f in ("libliveprof.so", "_fast.abi3.so"):
        if os.path.exists(os.path.join(package, f)):
            shutil.copy2(os.path.join(package, f), target)
    os.makedirs(os.path.join(target, "bootstrap"), exist_ok=True)
    shutil.copy2(os.path.join(build, "python", "bootstrap", "sitecustomize.py"), os.path.join(target, "bootstrap"))

    program = os.path.join(build, "bin", "liveprof")
    os.makedirs(os.path.join(target, "bin"), exist_ok=True)
    installed = os.path.join(target, "bin", "liveprof")
    shutil.copy2(program, installed)
    if shutil.which("strip"):  # (its symbol table: a third of the file)
        subprocess.check_call(["strip", "--strip-unneeded", installed])
    lib = os.path.join(target, "lib")
    shutil.rmtree(lib, ignore_errors=True)
    os.makedirs(lib)
    for soname, path in sorted(carried_libraries(program).items()):
        shutil.copyfile(path, os.path.join(lib, soname))

    static = os.path.join(ROOT, "static")
    if not os.path.isfile(os.path.join(static, "vendor", "uPlot.iife.min.js")):
        raise RuntimeError("%s/vendor has no uPlot: run scripts/setup.sh (it copies the dashboard's npm "
                           "packages there)" % static)
    shutil.rmtree(os.path.join(target, "static"), ignore_errors=True)
    shutil.copytree(static, os.path.join(target, "static"), ignore=shutil.ignore_patterns("README.md", ".*"))


class BuildPyWithNative(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "liveprof")
        os.makedirs(target, exist_ok=True)
        build_native(target)


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False  # (a native library inside)

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


# setuptools' own scratch out of CMake's build/ and of the sources.
SCRATCH = os.path.join("build", "setuptools")
os.makedirs(SCRATCH, exist_ok=True)
setup(cmdclass={"build_py": BuildPyWithNative, "bdist_wheel": PlatformWheel},
      options={"build": {"build_base": SCRATCH}, "egg_info": {"egg_base": SCRATCH},
               "bdist_wheel": {"bdist_dir": os.path.join(SCRATCH, "bdist")}})
