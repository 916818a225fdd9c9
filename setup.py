"""Builds the wheel's one native file, libliveprof.so, before setuptools packs
src/python/liveprof (pyproject.toml holds everything else).

libliveprof.so is the CMake target liveprof_shared: built in
$LIVEPROF_BUILD_DIR (default build/, configured if it is not) with the
project's own build, never downloaded. The wheel is tagged py3-none-<platform>:
it holds no extension module, so one wheel serves every Python 3.
"""

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


def build_native():
    """libliveprof.so and, where Python's headers were found, the optional
    span object _fast.abi3.so (stable ABI): the package's two native files."""
    build = os.path.abspath(os.environ.get("LIVEPROF_BUILD_DIR", os.path.join(ROOT, "build")))
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"])
    subprocess.check_call(["cmake", "--build", build, "--target", "liveprof_python"])
    package = os.path.join(build, "python", "liveprof")
    return [os.path.join(package, f) for f in ("libliveprof.so", "_fast.abi3.so")
            if os.path.exists(os.path.join(package, f))]


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "liveprof")
        os.makedirs(target, exist_ok=True)
        for f in build_native():
            shutil.copy2(f, target)


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
setup(cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel},
      options={"build": {"build_base": SCRATCH}, "egg_info": {"egg_base": SCRATCH},
               "bdist_wheel": {"bdist_dir": os.path.join(SCRATCH, "bdist")}})
