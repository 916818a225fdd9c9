#!/usr/bin/env bash
# gpu-stage: puts what the GPU checks need into .gpu/ (ignored by git) for a
# machine that has a GPU but none of our build dependencies: the binaries
# (liveprof, cuda_train), the Python package with libliveprof.so and the
# bootstrap, and the shared libraries they link that are not the C and C++
# runtimes (Boost, cnats, protobuf, zlib, ... and libcudart). On that
# machine, scripts/gpu-device.sh links the ones it lacks and runs both
# checks (scripts/gpu-check.sh, scripts/gpu-run-check.sh).
#
#   scripts/gpu-stage.sh [BUILD]        # default build/; writes .gpu/
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${1:-build}
for f in "${BUILD}/bin/liveprof" "${BUILD}/bin/cuda_train" "${BUILD}/python/liveprof/libliveprof.so" \
         "${BUILD}/python/bootstrap/sitecustomize.py"; do
  [[ -e ${f} ]] || { echo "gpu-stage: ${f} missing: build ${BUILD} first" >&2; exit 1; }
done
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.gpu/' >>.git/info/exclude; }

rm -rf .gpu
mkdir -p .gpu/build/bin .gpu/build/python .gpu/lib
cp "${BUILD}/bin/liveprof" "${BUILD}/bin/cuda_train" .gpu/build/bin/
cp -r "${BUILD}/python/liveprof" "${BUILD}/python/bootstrap" .gpu/build/python/
find .gpu/build/python -name '__pycache__' -prune -exec rm -rf {} +
strip --strip-debug .gpu/build/bin/* .gpu/build/python/liveprof/*.so

# Every library the three link, less the runtimes any Linux has (a newer
# libstdc++ there must win: PyTorch needs it).
ldd .gpu/build/bin/liveprof .gpu/build/bin/cuda_train .gpu/build/python/liveprof/libliveprof.so |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "${lib}" .gpu/lib/; done
echo "gpu-stage: .gpu/ holds $(du -sh .gpu | cut -f1): $(ls .gpu/lib | tr '\n' ' ')"
