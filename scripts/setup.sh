#!/usr/bin/env bash
# Installs what liveprof needs to build and test, from Debian's packages only.
# Idempotent: a package that is already installed is skipped, and apt-get is
# not touched at all when nothing is missing.
set -euo pipefail

# C++ toolchain and libraries. Never libboost-dev: it is Boost 1.74 and
# conflicts with libboost1.81-dev.
PACKAGES=(
  build-essential cmake ninja-build
  libboost1.81-dev
  libboost-url1.81-dev  # Boost.URL (compiled): request targets, %-decoding (src/web)
  libflatbuffers-dev flatbuffers-compiler
  libconcurrentqueue-dev
  nlohmann-json3-dev
  libcli11-dev  # the liveprof command line (src/app; header-only CLI11)
  zlib1g-dev libsimdjson-dev  # trace files: gzip, JSON (src/import)
  libprotobuf-dev protobuf-compiler  # XPlane trace files (src/import/xplane.proto)
  doctest-dev
  libbenchmark-dev
  prometheus  # for /usr/bin/promtool: `promtool check metrics` / `test rules` in the tests
  # the fleet (src/fleet): NATS's C client with JetStream, and a real
  # nats-server (JetStream built in) that the fleet tests start on loopback.
  libnats-dev nats-server
  python3-websockets  # a real third-party WebSocket client for the server tests (/usr/bin/python3)
  python3-flatbuffers  # FlatBuffers' Python runtime: reading the binary event frames from Python
  # clang 14 and libFuzzer (libclang_rt.fuzzer-x86_64.a is in libclang-rt-14-dev)
  # for fuzz/build_and_run.sh.
  clang libclang-rt-14-dev
  # the code's style (.clang-format), checked by a test (scripts/check_format.sh).
  clang-format-14
  # the dashboard's browser tests: Debian's Chromium, driven by playwright-core
  # from npm (never a browser download of playwright's own).
  chromium
  # The Python package (src/python) is pure Python over libliveprof.so
  # (ctypes): nothing to build it with. Debian's PyTorch (CPU) for the
  # examples and their end-to-end tests; venv, pip, setuptools and wheel for
  # `pip install .` offline and its test.
  python3-torch python3-venv python3-pip python3-setuptools python3-wheel
  # the optional span object in C (src/python/fast_span.c): Python's headers.
  python3-dev
)

# The dashboard's npm packages (package.json, package-lock.json): uPlot and
# FlatBuffers' JavaScript runtime, which the page serves from static/vendor/
# (copied, never committed), and playwright-core for the browser tests. Run
# after the Debian packages.
setup_npm() {
  if [[ ! -f node_modules/.package-lock.json ]] ||
    ! cmp -s package-lock.json node_modules/.liveprof-lock; then
    echo "setup: npm ci (uplot, flatbuffers, playwright-core)"
    npm ci --no-audit --no-fund --loglevel=error
    cp package-lock.json node_modules/.liveprof-lock
  fi
  mkdir -p static/vendor
  rm -f static/vendor/uPlot.esm.js  # served before; the minified build replaced it.
  for f in uPlot.iife.min.js uPlot.min.css; do
    if ! cmp -s "node_modules/uplot/dist/$f" "static/vendor/$f"; then
      cp "node_modules/uplot/dist/$f" "static/vendor/$f"
    fi
  done
  # FlatBuffers' ES-module build (mjs/: one file per module, flatbuffers.js
  # the entry) for static/trace/tile_reader.js; FlexBuffers is not used.
  mkdir -p static/vendor/flatbuffers
  for f in node_modules/flatbuffers/mjs/*.js; do
    [[ $(basename "$f") == flexbuffers.js ]] && continue
    if ! cmp -s "$f" "static/vendor/flatbuffers/$(basename "$f")"; then
      cp "$f" static/vendor/flatbuffers/
    fi
  done
}
cd "$(dirname "$0")/.."

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  setup_npm
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

# Some packages (prometheus) start a daemon from their postinst. We only want
# their tools, and in a container without an init system a start can fail
# and fail the install. Where no init system runs and no policy-rc.d exists,
# put one in place for the install that denies service starts (exit 101, the
# documented "action forbidden"), and take it away again afterwards. A real
# failure of an install still fails setup: apt-get's status is not masked.
POLICY=/usr/sbin/policy-rc.d
added_policy=0
remove_policy() {
  if ((added_policy)); then $SUDO rm -f "$POLICY"; fi
}
trap remove_policy EXIT
if [[ ! -d /run/systemd/system && ! -e $POLICY ]]; then
  printf '#!/bin/sh\n# added by liveprof scripts/setup.sh for the install only\nexit 101\n' |
    $SUDO tee "$POLICY" >/dev/null
  $SUDO chmod 755 "$POLICY"
  added_policy=1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

# The tools the tests call by absolute path must run.
if ! /usr/bin/promtool --version >/dev/null 2>&1; then
  echo "setup: /usr/bin/promtool does not run after the install" >&2
  exit 1
fi
if ! /usr/sbin/nats-server --version >/dev/null 2>&1; then
  echo "setup: /usr/sbin/nats-server does not run after the install" >&2
  exit 1
fi
setup_npm
echo "setup: done"
