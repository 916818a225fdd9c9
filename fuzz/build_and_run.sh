#!/usr/bin/env bash
# Builds the control-message fuzzer (fuzz/control_message_fuzz.cc) with
# clang 14 and libFuzzer under ASan+UBSan, straight from the few sources it
# needs (no CMake: the project's build is GCC), and runs it on a copy of the
# seed corpus in a temp dir (the seeds in the repo are never rewritten).
# Exits non-zero on a build failure or on any crash, leak, UB report or
# timeout; a crashing input is kept in OUT_DIR as crash-<sha1>.
#
#   fuzz/build_and_run.sh OUT_DIR [RUNS]    (RUNS defaults to 1000000)
#
# Needs Debian's clang-14 and libclang-rt-14-dev (libFuzzer, the sanitizer
# runtimes); scripts/setup.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 1 ]]; then
  echo "usage: $0 OUT_DIR [RUNS]" >&2
  exit 2
fi
out=$1
runs=${2:-1000000}
cxx=${FUZZ_CXX:-clang++-14}
mkdir -p "${out}"
out=$(cd "${out}" && pwd)

# The decoder and what it links: protocol.cc (DecodeControlMessage,
# Encode*), event.cc (kind names), json_writer.cc (the JSON it writes).
sources=(
  fuzz/control_message_fuzz.cc
  src/web/protocol.cc
  src/stream/event.cc
  src/aggregators/json_writer.cc
)
echo "fuzz: building ${out}/control_message_fuzz with ${cxx}"
"${cxx}" -std=c++20 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -Wall -Wextra -Werror -Isrc \
  "${sources[@]}" -o "${out}/control_message_fuzz"

corpus=$(mktemp -d)
trap 'rm -rf "${corpus}"' EXIT
cp fuzz/corpus/control_message/*.json "${corpus}/"

echo "fuzz: ${runs} runs on a copy of fuzz/corpus/control_message ($(ls "${corpus}" | wc -l) seeds)"
start=$(date +%s)
# -max_len: room for the limits' edges (1025 tracks, 17 topics) but not the
# 64 KiB message cap, which the unit tests cover.
status=0
"${out}/control_message_fuzz" "${corpus}" \
  -runs="${runs}" -max_len=8192 -timeout=10 \
  -dict=fuzz/control_message.dict \
  -artifact_prefix="${out}/" -print_final_stats=1 || status=$?
end=$(date +%s)
echo "fuzz: exit ${status} after $((end - start)) s"
exit "${status}"
