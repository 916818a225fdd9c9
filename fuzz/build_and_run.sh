#!/usr/bin/env bash
# Builds a fuzzer with clang 14 and libFuzzer under ASan+UBSan, straight from
# the few sources it needs (no CMake: the project's build is GCC), and runs it
# on a copy of its seed corpus in a temp dir (the seeds in the repo are never
# rewritten). Exits non-zero on a build failure or on any crash, leak, UB
# report or timeout; a crashing input is kept in OUT_DIR as crash-<sha1>.
#
#   fuzz/build_and_run.sh TARGET OUT_DIR [RUNS]    (RUNS defaults to 1000000;
#                                                   "90s": run for 90 seconds)
#
# TARGET: control_message (the WebSocket control-message decoder),
# chrome_trace (the Chrome trace JSON importer), xplane (the XPlane
# importer; its seeds are text-format XSpaces that protoc encodes here) or
# ingest_frame (socket ingest's frames; binary seeds, a leading byte that
# sets how the stream is cut, then size-prefixed frames) or cupti_records
# (the CUPTI record parser and recording format; seeds cut from the H200
# recordings of ../shared/data/gpu by fuzz/cupti_seeds.py).
#
# Needs Debian's clang-14 and libclang-rt-14-dev (libFuzzer, the sanitizer
# runtimes); scripts/setup.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 2 ]]; then
  echo "usage: $0 control_message|chrome_trace|xplane|ingest_frame|cupti_records OUT_DIR [RUNS]" >&2
  exit 2
fi
target=$1
out=$2
runs=${3:-1000000}
cxx=${FUZZ_CXX:-clang++-14}
mkdir -p "${out}"
out=$(cd "${out}" && pwd)

libs=()
# The schema's header (flatc, as the build does): src/stream/event.cc reads
# the kind names from it, and every target compiles the stream.
mkdir -p "${out}/gen/stream"
flatc --cpp --scoped-enums -o "${out}/gen/stream" src/stream/liveprof.fbs
case "${target}" in
  control_message)
    # The decoder and what it links: protocol.cc (DecodeControlMessage,
    # Encode*), event.cc (kind names), json_writer.cc (the JSON it writes).
    sources=(src/web/protocol.cc src/stream/event.cc src/base/json_writer.cc)
    # -max_len: room for the limits' edges (1025 tracks, 17 topics) but not
    # the 64 KiB message cap, which the unit tests cover.
    max_len=8192
    ;;
  chrome_trace)
    # The importer and the stream pieces it uses (names, definitions).
    sources=(src/import/chrome_trace.cc src/import/chrome_trace_entry.cc src/import/chunk_reader.cc src/import/decimal.cc
             src/import/json_splitter.cc src/stream/*.cc)
    libs=(-lsimdjson -lz -lpthread)
    max_len=4096
    ;;
  xplane)
    # The generated XSpace classes (protoc, as the build does), compiled on
    # their own: generated code is not held to our warnings.
    mkdir -p "${out}/gen"
    protoc --cpp_out="${out}/gen" -Isrc/import src/import/xplane.proto
    "${FUZZ_CXX:-clang++-14}" -std=c++20 -O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=address,undefined \
      -fno-sanitize-recover=all -w -c "${out}/gen/xplane.pb.cc" -o "${out}/gen/xplane.pb.o"
    sources=(src/import/xplane.cc src/import/chunk_reader.cc src/import/chrome_trace.cc src/import/decimal.cc
             src/import/json_splitter.cc src/aggregators/tf/tf_op_name.cc src/stream/*.cc "${out}/gen/xplane.pb.o")
    libs=(-isystem "${out}/gen" -lprotobuf -lsimdjson -lz -lpthread)
    max_len=4096
    ;;
  ingest_frame)
    # The frame splitter and decoder with the stream they write to.
    sources=(src/ingest/ingest_frames.cc src/stream/*.cc)
    libs=(-isystem "${out}/gen" -lpthread)
    max_len=4096
    ;;
  cupti_records)
    # The record parser and the recording format with the stream they write
    # to; the CUDA toolkit's headers (the record structs) only.
    sources=(src/producers/cupti_records.cc src/producers/cupti_names.cc src/producers/cupti_recording.cc src/stream/*.cc)
    libs=(-isystem /usr/local/cuda/include -lpthread)
    # Room for a whole recording (h200_loop.bin is 59,005 bytes with its
    # form byte).
    max_len=65536
    ;;
  *)
    echo "$0: unknown target '${target}' (control_message, chrome_trace, xplane, ingest_frame or cupti_records)" >&2
    exit 2
    ;;
esac
echo "fuzz: building ${out}/${target}_fuzz with ${cxx}"
"${cxx}" -std=c++20 -O1 -gline-tables-only -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -Wall -Wextra -Werror -Isrc -isystem "${out}/gen" \
  "fuzz/${target}_fuzz.cc" "${sources[@]}" "${libs[@]}" -o "${out}/${target}_fuzz"

corpus=$(mktemp -d)
trap 'rm -rf "${corpus}"' EXIT
if [[ ${target} == xplane ]]; then
  for seed in fuzz/corpus/xplane/*.txtpb; do
    protoc -Isrc/import --encode=liveprof.xplane.XSpace xplane.proto <"${seed}" >"${corpus}/$(basename "${seed}" .txtpb).pb"
  done
elif [[ ${target} == ingest_frame ]]; then
  cp fuzz/corpus/ingest_frame/*.bin "${corpus}/"
elif [[ ${target} == cupti_records ]]; then
  # The real GPU's recordings, cut into seeds here (never kept in the repo).
  gpu_data=../shared/data/gpu
  if [[ ! -d ${gpu_data} ]]; then
    echo "fuzz: ${gpu_data} is absent: the CUPTI parser's seeds are its recordings" >&2
    exit 1
  fi
  python3 fuzz/cupti_seeds.py "${gpu_data}" "${corpus}"
else
  cp fuzz/corpus/"${target}"/*.json "${corpus}/"
fi

# RUNS: a number of runs, or a time ("90s": -max_total_time, as CI bounds it).
if [[ ${runs} == *s ]]; then
  limit=(-max_total_time="${runs%s}")
  what="${runs%s} s"
else
  limit=(-runs="${runs}")
  what="${runs} runs"
fi
echo "fuzz: ${what} on a copy of fuzz/corpus/${target} ($(ls "${corpus}" | wc -l) seeds)"
start=$(date +%s)
status=0
"${out}/${target}_fuzz" "${corpus}" \
  "${limit[@]}" -max_len="${max_len}" -timeout=10 \
  -dict="fuzz/${target}.dict" \
  -artifact_prefix="${out}/" -print_final_stats=1 || status=$?
end=$(date +%s)
echo "fuzz: exit ${status} after $((end - start)) s"
exit "${status}"
