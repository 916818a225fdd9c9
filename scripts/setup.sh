#!/usr/bin/env bash
# Installs what liveprof needs to build and test, from Debian's packages only.
# Idempotent: a package that is already installed is skipped, and apt-get is
# not touched at all when nothing is missing.
set -euo pipefail

# C++ toolchain and libraries. Never libboost-dev: it is Boost 1.74 and
# conflicts with libboost1.81-dev (see docs/toolchain notes in README).
PACKAGES=(
  build-essential cmake ninja-build
  libboost1.81-dev
  libflatbuffers-dev flatbuffers-compiler
  libconcurrentqueue-dev
  nlohmann-json3-dev
  doctest-dev
  libbenchmark-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
