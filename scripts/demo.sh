#!/usr/bin/env bash
# Installs what is missing, builds liveprof and serves its demo: the
# dashboard, REST, /metrics and the WebSocket feed on the simulated GPU
# workload, whose schedule cycles through the scenarios (balanced,
# input-bound, launch-bound, memory growth). Open the printed URL; Ctrl-C
# stops. Extra arguments go to `liveprof demo` (try --scenario input_bound,
# --port 0, or --seconds 30 for a bounded run).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "${JOBS:-$(nproc)}" --target liveprof
exec build/bin/liveprof demo "$@"
