#!/usr/bin/env bash
# gpu-run-check: `liveprof run` on a real NVIDIA GPU with an unmodified
# PyTorch CUDA training loop (examples/pytorch_plain.py --device cuda), and
# the same loop under torch.profiler for comparison (bench/RESULTS.md,
# "On a real GPU"). Uses what this repository's build made (build/bin/liveprof,
# build/python: the package, libliveprof.so and the bootstrap) and the
# machine's own Python with PyTorch; downloads nothing.
#
#   scripts/gpu-run-check.sh [OUT_DIR]     # PYTHON=python3 STEPS=200 BUILD=build
#   (DEVICE=cpu runs the same plumbing on a machine without a GPU: a dry run)
#
# Writes to OUT_DIR (default a temporary folder): run.log, each view as
# JSON (kernel_stats, steps, input_pipeline, memory, status, overview),
# torch_profile.json (torch.profiler's per-kernel counts and times) and
# compare.txt: per kernel name, liveprof's count vs torch.profiler's, and
# PASS/FAIL lines; then a level-3 run with two loader workers (run3.log,
# modules3.json, status3.json, compare3.txt: module table, loader sources). Exit status: 0 all passed, 1 a mismatch or a failure, 2
# no GPU here.
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-200}
DEVICE=${DEVICE:-cuda}
OUT=${1:-$(mktemp -d)}
mkdir -p "${OUT}"

if ! nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"${OUT}/gpu.txt" 2>&1; then
  echo "gpu-run-check: no NVIDIA GPU/driver: $(cat "${OUT}/gpu.txt")" >&2
  exit 2
fi
echo "gpu-run-check: GPU $(head -1 "${OUT}/gpu.txt"); ${PYTHON}: $(${PYTHON} -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1)"
for f in "${BUILD}/bin/liveprof" "${BUILD}/python/liveprof/libliveprof.so" "${BUILD}/python/bootstrap/sitecustomize.py"; do
  [[ -e ${f} ]] || { echo "gpu-run-check: FAIL: ${f} missing (build it: cmake --build ${BUILD})" >&2; exit 1; }
done

fails=0
check() {  # check NAME CONDITION-EXIT-STATUS MESSAGE
  if [[ $2 -eq 0 ]]; then echo "PASS $1: $3"; else echo "FAIL $1: $3"; fails=$((fails + 1)); fi
}

# http_get URL: the body on stdout (curl where there is one, else Python).
http_get() {
  if command -v curl >/dev/null 2>&1; then
    curl -s "$1"
  else
    "${PYTHON}" -c 'import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1], timeout=30).read())' "$1"
  fi
}

# run_job LOG ARGS...: examples/pytorch_plain.py ARGS under liveprof run
# (lingering), until the job has exited; sets url and run_pid.
run_job() {
  local log=$1
  shift
  "${BUILD}/bin/liveprof" run --port 0 --linger 60 -- "${PYTHON}" examples/pytorch_plain.py "$@" >"${log}" 2>&1 &
  run_pid=$!
  url=""
  local i=0
  for _ in $(seq 600); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "${log}" | head -1)
    grep -q "the job exited" "${log}" && break
    kill -0 "${run_pid}" 2>/dev/null || break  # liveprof itself ended (it says why in the log).
    # /api/status while the job runs (its sources' GPU state is the running one's).
    if [[ -n ${url} ]]; then http_get "${url}/api/status" >"${log%.log}.status.$((i++ % 4)).json" 2>/dev/null; fi
    sleep 0.5
  done
  sleep 3  # the last CUPTI buffers and batches (flushed at the job's exit) reach the views.
}

# 1. The job under liveprof run; the views read while it lingers.
run_job "${OUT}/run.log" --device "${DEVICE}" --steps "${STEPS}" --loader-delay-ms 20 --fast-after $((STEPS / 2)) --quiet
for v in kernel_stats "steps?last=${STEPS}" input_pipeline memory status overview; do
  http_get "${url}/api/${v}" >"${OUT}/${v%%\?*}.json"
done
kill -INT "${run_pid}" 2>/dev/null
wait "${run_pid}"
rc=$?
cat "${OUT}/run.log"
check "exit status" $((rc != 0)) "liveprof run exited ${rc}"
! grep -q "GPU activity is not traced" "${OUT}/run.log"
check "injection" $? "$(grep -m1 'GPU activity is not traced' "${OUT}/run.log" || echo 'no complaint from the injection (the kernels below say whether it traced)')"

# 2. The same loop with no profiler (the baseline for the step times), then
# under torch.profiler (separate processes, no liveprof).
"${PYTHON}" examples/pytorch_plain.py --device "${DEVICE}" --steps "${STEPS}" --loader-delay-ms 20 \
  --fast-after $((STEPS / 2)) --quiet >"${OUT}/plain.log" 2>&1
check "plain run" $? "no profiler: $(tail -1 "${OUT}/plain.log")"
"${PYTHON}" examples/pytorch_plain.py --device "${DEVICE}" --steps "${STEPS}" --loader-delay-ms 20 \
  --fast-after $((STEPS / 2)) --quiet --torch-profile "${OUT}/torch_profile.json" >"${OUT}/torch_profile.log" 2>&1
check "torch.profiler run" $? "$(tail -1 "${OUT}/torch_profile.log")"

# 3. Compare: kernels by name (counts must match: the same loop, the same
# kernels), steps, input, memory.
"${PYTHON}" - "${OUT}" "${STEPS}" <<'EOF' | tee "${OUT}/compare.txt"
import json, os, sys
out, steps = sys.argv[1], int(sys.argv[2])
ks = json.load(open(os.path.join(out, "kernel_stats.json")))
try:
    tp = json.load(open(os.path.join(out, "torch_profile.json")))["kernels"]
except (OSError, ValueError) as e:
    print("FAIL torch.profiler's kernels: %s" % e)
    tp = {}
lp = {}
for r in ks["rows"]:
    k = lp.setdefault(r["kernel_name"], {"count": 0, "total_us": 0.0})
    k["count"] += r["occurrences"]
    k["total_us"] += r["total_us"]
names = sorted(set(lp) | set(tp))
bad = 0
for n in names:
    a, b = lp.get(n, {"count": 0, "total_us": 0}), tp.get(n, {"count": 0, "total_us": 0})
    same = a["count"] == b["count"]
    bad += not same
    print("%s %6d %6d %10.1f %10.1f  %s" % ("  " if same else "!!", a["count"], b["count"], a["total_us"], b["total_us"], n[:100]))
print("%s kernels: %d names, liveprof %d kernels, torch.profiler %d; %d names differ in count"
      % ("PASS" if bad == 0 and names else "FAIL", len(names), sum(v["count"] for v in lp.values()),
         sum(v["count"] for v in tp.values()), bad))
st = json.load(open(os.path.join(out, "steps.json")))
col = st["columns"].index("Input")
slow = [r["ms"][col] for r in st["rows"] if 2 <= r["step"] < steps // 2 - 1]
fast = [r["ms"][col] for r in st["rows"] if r["step"] > steps // 2 + 1]
print("%s steps: %d seen of %d; input per slow step %.1f ms (loader 20), per fast step %.2f ms"
      % ("PASS" if len(st["rows"]) >= steps - 2 and slow and min(slow) > 15 else "FAIL", len(st["rows"]), steps,
         sum(slow) / max(1, len(slow)), sum(fast) / max(1, len(fast))))
mem = json.load(open(os.path.join(out, "memory.json")))
print("INFO memory: %s" % json.dumps(mem)[:600])
# What arrived late or unjoined: on a real GPU CUPTI hands buffers over late;
# the pipeline must wait for them (none late, every step with its kernels).
status = json.load(open(os.path.join(out, "status.json")))
diags = {d["name"]: d["count"] for d in status.get("diagnostics", []) if d.get("count")}
print("INFO diagnostics: %s; events %d, dropped %d" % (diags, status.get("events_consumed", 0), status.get("events_dropped", 0)))
for name in ("late_events", "late_for_step", "step_without_compute", "device_without_launch"):
    print("%s %s: %d" % ("PASS" if diags.get(name, 0) == 0 else "FAIL", name, diags.get(name, 0)))
EOF
grep -q "^FAIL" "${OUT}/compare.txt" && fails=$((fails + 1))

# 4. Level 3 with two DataLoader workers: per-module forward and backward
# time and each module's CUDA memory (/api/modules), and the workers as
# sources named after the job.
LIVEPROF_HOST_LEVEL=3 run_job "${OUT}/run3.log" --device "${DEVICE}" --steps 60 --num-workers 2 --quiet
http_get "${url}/api/modules" >"${OUT}/modules3.json"
http_get "${url}/api/status" >"${OUT}/status3.json"
kill -INT "${run_pid}" 2>/dev/null
wait "${run_pid}"
"${PYTHON}" - "${OUT}" <<'EOF' | tee "${OUT}/compare3.txt"
import json, os, sys
out = sys.argv[1]
rows = {r["name"]: r for r in json.load(open(os.path.join(out, "modules3.json")))["rows"]}
conv1 = rows.get("SmallCnn.conv1 (Conv2d)", {})
ok = conv1.get("calls", 0) >= 50 and conv1.get("backward_calls", 0) >= 50 and conv1.get("memory_bytes_max") is not None
print("%s modules at level 3 (forward, backward, CUDA memory kept): %s" % ("PASS" if ok else "FAIL", json.dumps(rows)[:900]))
import glob
src = json.load(open(os.path.join(out, "status3.json")))["server"]["ingest"]
live = []  # the sources as the job ran (the last snapshots, taken every 0.5 s)
for f in sorted(glob.glob(os.path.join(out, "run3.status.*.json"))):
    try:
        live.append(json.load(open(f))["server"]["ingest"])
    except (OSError, ValueError, KeyError):
        pass
labels = sorted(s["label"] for s in src)
print("%s loader workers as sources: %s" % ("PASS" if sum(" · loader " in l for l in labels) == 2 else "FAIL", labels))
# A forked worker has no GPU producer (CUDA does not work in it): never offered GPU capture.
gpu = sorted({(s["label"], (s.get("capture") or {}).get("gpu_available")) for snap in live for s in snap
              if s.get("connected")})
print("%s GPU producer only in the training process (while it ran): %s"
      % ("PASS" if gpu and all(a == (" · loader " not in l) for l, a in gpu) else "FAIL", gpu))
EOF
grep -q "^FAIL" "${OUT}/compare3.txt" && fails=$((fails + 1))
echo "gpu-run-check: ${fails} failure(s); everything is in ${OUT}"
[[ ${fails} -eq 0 ]]
