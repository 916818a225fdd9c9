#!/usr/bin/env bash
# Installs what is missing, builds liveprof and runs its demo. Extra
# arguments go to `liveprof demo` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "${JOBS:-$(nproc)}" --target liveprof
exec build/bin/liveprof demo "$@"
