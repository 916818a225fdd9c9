#!/usr/bin/env bash
# Installs what is missing, builds liveprof and runs its demo: the host-API
# example loop, then 20 s of the simulated GPU workload through the analyses
# (its schedule cycles through the scenarios). Extra arguments go to
# `liveprof simulate` (try --scenario input_bound).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "${JOBS:-$(nproc)}" --target liveprof
build/bin/liveprof demo --steps 20
exec build/bin/liveprof simulate --seconds 20 "$@"
