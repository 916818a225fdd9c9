#!/usr/bin/env bash
# gpu-device: on a machine with an NVIDIA GPU and what scripts/gpu-stage.sh
# put in .gpu/, runs the GPU checks and leaves their output in OUT_DIR:
# gpu-check.log (cuda_train against liveprof serve, and the tracing
# overhead), tiny-ops.log (tracing's cost per op of a PyTorch loop of tiny
# ops: liveprof vs torch.profiler), gpu-run-check.log and run-check.tgz (an
# unmodified PyTorch loop under liveprof run, compared with torch.profiler),
# env.txt (the machine).
#
#   scripts/gpu-device.sh OUT_DIR            # PYTHON=python3
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?OUT_DIR}
PYTHON=${PYTHON:-python3}
mkdir -p "${OUT}" .gpu/need

# CUPTI and the CUDA runtime where the machine has them: the toolkit's, else
# the pip packages PyTorch brought.
dirs=()
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d ${d} ]] && dirs+=("${d}")
done
if ! ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13* >/dev/null 2>&1; then
  cupti=$(find / -xdev -name 'libcupti.so.13*' 2>/dev/null | head -1)
  [[ -n ${cupti} ]] && dirs+=("$(dirname "${cupti}")")
fi
export LD_LIBRARY_PATH="$(IFS=:; echo "${dirs[*]}")${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
# Our libraries only where the machine lacks them (again until none is
# missing: a library found here can need another, say libnats protobuf-c).
export LD_LIBRARY_PATH="$(pwd)/.gpu/need:${LD_LIBRARY_PATH}"
for _ in 1 2 3 4; do
  for bin in .gpu/build/bin/liveprof .gpu/build/bin/cuda_train .gpu/build/python/liveprof/libliveprof.so; do
    ldd "${bin}" | awk '/not found/ {print $1}'
  done | sort -u | while read -r name; do
    if [[ -e .gpu/lib/${name} ]]; then ln -sf "$(pwd)/.gpu/lib/${name}" .gpu/need/; else echo "gpu-device: ${name} missing, not staged"; fi
  done
done

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "python: $(${PYTHON} -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1)"
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH}"
  echo "linked from .gpu/lib: $(ls .gpu/need | tr '\n' ' ')"
  for bin in .gpu/build/bin/liveprof .gpu/build/bin/cuda_train .gpu/build/python/liveprof/libliveprof.so; do
    ldd "${bin}" | grep -E "not found|cudart|cupti" | sed "s|^|${bin##*/}: |"
  done
  echo "libcupti: $(find / -xdev -name 'libcupti.so.13*' 2>/dev/null | tr '\n' ' ')"
} >"${OUT}/env.txt" 2>&1
cat "${OUT}/env.txt"

# PARTS: which of check (cuda_train), tiny (bench/gpu_tiny_ops_bench.py),
# run (the PyTorch loop under liveprof run), corpus (tests/attach/corpus/
# with --device cuda under liveprof run: PyTorch 2's hooks, a script that
# runs torch.profiler over steps 10-19 itself, mp.spawn ranks on the one
# GPU) to run, in that order.
PARTS=${PARTS:-check tiny run corpus}
status=0
if [[ " ${PARTS} " == *" check "* ]]; then
  BUILD=.gpu/build timeout "${CHECK_TIMEOUT:-120}" scripts/gpu-check.sh >"${OUT}/gpu-check.log" 2>&1 || status=1
  echo "=== gpu-check: rc ${status}"; tail -40 "${OUT}/gpu-check.log"
fi
if [[ " ${PARTS} " == *" tiny "* ]]; then
  timeout "${TINY_TIMEOUT:-150}" "${PYTHON}" bench/gpu_tiny_ops_bench.py --liveprof .gpu/build/bin/liveprof \
    --rounds "${TINY_ROUNDS:-5}" >"${OUT}/tiny-ops.log" 2>&1 || status=1
  echo "=== tiny ops:"; cat "${OUT}/tiny-ops.log"
fi
if [[ " ${PARTS} " == *" run "* ]]; then
  BUILD=.gpu/build PYTHON=${PYTHON} timeout "${RUN_TIMEOUT:-270}" scripts/gpu-run-check.sh "${OUT}/run" >"${OUT}/gpu-run-check.log" 2>&1 || status=1
  echo "=== gpu-run-check:"; grep -E "^(PASS|FAIL|INFO|!!|gpu-run-check)" "${OUT}/gpu-run-check.log" | cut -c1-400
  tar -czf "${OUT}/run-check.tgz" -C "${OUT}" run 2>/dev/null && rm -rf "${OUT}/run"
fi
if [[ " ${PARTS} " == *" corpus "* ]]; then
  timeout "${CORPUS_TIMEOUT:-240}" "${PYTHON}" tests/attach/corpus_test.py --liveprof .gpu/build/bin/liveprof \
    --device cuda --python "$(command -v "${PYTHON}")" --jobs "${CORPUS_JOBS:-4}" >"${OUT}/corpus.log" 2>&1 || status=1
  echo "=== corpus (cuda):"; grep -E "PASS|FAIL|skipped|^corpus" "${OUT}/corpus.log" | cut -c1-300
fi
exit "${status}"
