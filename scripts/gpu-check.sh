#!/usr/bin/env bash
# gpu-check: liveprof on a real NVIDIA GPU, end to end. Builds what is
# missing (build dir $BUILD, default build-gpu), starts
#   liveprof serve --ingest unix:SOCK --port 0
# runs examples/cuda_train.cu against it (it prints, as JSON, what it did),
# then reads the server's views (/api/kernel_stats, /api/memory, /api/steps,
# /api/overview, /api/status, and /api/export for the copies and memsets)
# and prints, per view, what it shows and whether it equals what the
# program did: one "PASS view: ..." or "FAIL view: ..." line each. Then the
# tracing overhead of a launch-bound loop of empty kernels (cuda_train
# --overhead): CUPTI off, level default, level full, per launch + run.
#
#   scripts/gpu-check.sh             # STEPS=20 LAUNCHES=20000 BUILD=build-gpu
#
# Exit status: 0 when every check passed, 1 on a mismatch or a failed step,
# 2 when there is no GPU here (nvidia-smi missing or failing).
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build-gpu}
STEPS=${STEPS:-20}
LAUNCHES=${LAUNCHES:-20000}

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu-check: FAIL: no NVIDIA GPU/driver: nvidia-smi not found" >&2
  exit 2
fi
if ! gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1) ||
   [[ -z $gpu ]]; then
  echo "gpu-check: FAIL: no NVIDIA GPU/driver: nvidia-smi says: ${gpu}" >&2
  exit 2
fi
echo "gpu-check: GPU ${gpu} (name, driver)"

if [[ ! -x ${BUILD}/bin/liveprof || ! -x ${BUILD}/bin/cuda_train ]]; then
  echo "gpu-check: building liveprof and cuda_train in ${BUILD}"
  if ! cmake -S . -B "${BUILD}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIVEPROF_BUILD_TESTS=OFF \
         -DLIVEPROF_BUILD_BENCH=OFF -DLIVEPROF_GPU_EXAMPLES=ON >/dev/null ||
     ! cmake --build "${BUILD}" --target liveprof cuda_train; then
    echo "gpu-check: FAIL: the build failed" >&2
    exit 1
  fi
fi
if [[ ! -x ${BUILD}/bin/cuda_train ]]; then
  echo "gpu-check: FAIL: ${BUILD}/bin/cuda_train was not built (no nvcc found by CMake?)" >&2
  exit 1
fi

work=$(mktemp -d)
sock=${work}/ingest.sock
"${BUILD}/bin/liveprof" serve --ingest "unix:${sock}" --port 0 >"${work}/serve.log" 2>&1 &
serve_pid=$!
cleanup() {
  kill "${serve_pid}" 2>/dev/null
  wait "${serve_pid}" 2>/dev/null
  rm -rf "${work}"
}
trap cleanup EXIT

url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*/' "${work}/serve.log" | head -1)
  [[ -n ${url} ]] && break
  sleep 0.1
done
if [[ -z ${url} ]]; then
  echo "gpu-check: FAIL: liveprof serve did not start:" >&2
  cat "${work}/serve.log" >&2
  exit 1
fi
echo "gpu-check: liveprof serve at ${url}, ingest unix:${sock}"

if ! "${BUILD}/bin/cuda_train" --steps "${STEPS}" --connect "unix:${sock}" \
       --record "${work}/cuda_train.bin" >"${work}/done.json" 2>"${work}/train.log"; then
  echo "gpu-check: FAIL: cuda_train failed:" >&2
  cat "${work}/train.log" >&2
  exit 1
fi
cat "${work}/train.log"
echo "gpu-check: cuda_train did: $(cat "${work}/done.json")"
sleep 2  # the server's pipeline publishes its views on a tick.

status=0
python3 - "${url}" "${work}/done.json" <<'PY' || status=1
import collections, gzip, json, sys, urllib.request

url, done_path = sys.argv[1], sys.argv[2]
done = json.load(open(done_path))
failed = 0

def get(path):
    with urllib.request.urlopen(url.rstrip("/") + path, timeout=30) as r:
        body = r.read()
    return body

def view(path):
    return json.loads(get(path))

def check(name, shown, expected):
    global failed
    ok = shown == expected
    failed += not ok
    print(f"{'PASS' if ok else 'FAIL'} {name}: shows {shown}" + ("" if ok else f", the program did {expected}"))

# Kernel stats: occurrences by kernel name, each joined to a framework op.
ks = view("/api/kernel_stats")
by_name = collections.Counter()
without_op = 0
for row in ks.get("rows", []):
    by_name[row["kernel_name"]] += row["occurrences"]
    if not row.get("op_name"):
        without_op += row["occurrences"]
    print(f"  kernel {row['kernel_name']}: {row['occurrences']} x, grid {row['grid']}, "
          f"block {row['block']}, shared {row['shared_mem_bytes']} B, "
          f"regs {row['registers_per_thread']}, op {row.get('op_name') or '-'}")
check("kernel_stats: kernels by name", dict(by_name), done["kernels"])
check("kernel_stats: kernels without a framework op", without_op, 0)

# Copies and memsets: every event the trace store holds (the export).
trace = json.loads(gzip.decompress(get("/api/export")))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
copies = collections.defaultdict(lambda: {"count": 0, "bytes": 0})
memsets = {"count": 0, "bytes": 0}
for e in events:
    if e.get("cat") == "gpu_memcpy":
        direction = next((d for d in ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP") if d in e["name"]), "?")
        copies[direction]["count"] += 1
        copies[direction]["bytes"] += int(e["args"]["bytes"])
    elif e.get("cat") == "gpu_memset":
        memsets["count"] += 1
        memsets["bytes"] += int(e["args"]["bytes"])
check("export: copies by direction", dict(copies), done["copies"])
check("export: memsets", memsets, done["memsets"])

# Memory profile: cudaMalloc/cudaFree ("cuda") and the stream-ordered pool ("cuda_async").
mem = view("/api/memory")
allocators = {}
for m in mem.get("memories", []):
    print(f"  memory {m['id']} ({m['allocator']}): {m['num_allocations']} allocations, "
          f"{m['num_deallocations']} frees, peak {m['peak_bytes']} B, live {m['live_allocations']}")
    a = allocators.setdefault(m["allocator"], [0, 0])
    a[0] += m["num_allocations"]
    a[1] += m["num_deallocations"]
a = done["allocs"]
check("memory: cuda allocations/frees", allocators.get("cuda"), [a["cudaMalloc"], a["cudaFree"]])
check("memory: cuda_async allocations/frees", allocators.get("cuda_async"),
      [a["cudaMallocAsync"], a["cudaFreeAsync"]])

# Status: steps, drops, the diagnostics an input like this must not raise.
st = view("/api/status")
print(f"  status: steps_closed {st.get('steps_closed')}, steps_open {st.get('steps_open')}, "
      f"events_dropped {st.get('events_dropped')}, step_source {st.get('step_source')}")
diags = {d["name"]: d["count"] for d in st.get("diagnostics", []) if d.get("count")}
for name, count in sorted(diags.items()):
    print(f"  diagnostic {name}: {count}")
# The last step closes when a successor is seen: at least STEPS - 1 closed.
check("status: steps closed (at least steps - 1)", st.get("steps_closed", 0) >= done["steps"] - 1, True)
check("status: events dropped", st.get("events_dropped"), 0)
bad = {k: v for k, v in diags.items()
       if any(s in k for s in ("undefined", "unknown", "without_launch", "dropped", "refused"))}
check("status: no unknown-address, undefined-track, launchless or drop diagnostics", bad, {})

# Steps and overview: what they show (the breakdown is the program's own).
steps = view("/api/steps")
rows = steps.get("rows") if isinstance(steps.get("rows"), list) else []
print(f"  steps: {len(rows)} steps in the view; keys {sorted(steps.keys())}")
for s in rows[:3]:
    print("   ", json.dumps(s)[:300])
ov = view("/api/overview")
print("  overview:", json.dumps({k: ov[k] for k in list(ov)[:12]})[:800])
check("steps: the view has steps", len(rows) > 0, True)
sys.exit(1 if failed else 0)
PY

echo "gpu-check: launch-bound overhead (${LAUNCHES} empty kernels x 5 rounds, median per launch+run):"
for level in off default full; do
  if ! "${BUILD}/bin/cuda_train" --overhead "${level}" --launches "${LAUNCHES}" 2>/dev/null; then
    echo "FAIL overhead ${level}: cuda_train --overhead ${level} failed"
    status=1
  fi
done

if [[ ${status} -eq 0 ]]; then
  echo "gpu-check: PASS on ${gpu}"
else
  echo "gpu-check: FAIL on ${gpu} (server log: below)"
  tail -20 "${work}/serve.log"
fi
exit "${status}"
