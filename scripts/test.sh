#!/usr/bin/env bash
# Installs what is missing, builds everything, and runs every test: the full
# suite (Release, GCC), then again under ASan+UBSan (clang), the stream, host
# API and threaded parts under TSan (clang), and the fuzzers (libFuzzer, 15 s
# and one test each: the WebSocket control messages, the Chrome trace and
# XPlane importers, the ingest frames, the CUPTI record parser). Each stage's
# wall time is printed; docs/ci.md says how it stays under 30 minutes.
# Ends with one line: "tests: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh || exit 1
JOBS=${JOBS:-$(nproc)}
passed=0
failed=0
status=0
failed_names=()  # "suite: test" for each failure, printed again at the end

# run_suite NAME BUILD_DIR [cmake options...]: configure, build, ctest.
# SUITE_TARGETS (space separated) builds only those targets; SUITE_TESTS (a
# ctest -R regex) runs only the tests it matches, and SUITE_LABEL (a ctest
# label) the tests so labelled as well.
run_suite() {
  local name=$1 dir=$2
  shift 2
  echo "=== ${name}: configure and build (${dir})"
  mkdir -p "${dir}"
  if ! cmake -S . -B "${dir}" -G Ninja "$@" >"${dir}/configure.log" 2>&1; then
    cat "${dir}/configure.log"
    echo "=== ${name}: configure FAILED"
    status=1
    return
  fi
  local targets=()
  for t in ${SUITE_TARGETS:-}; do targets+=(--target "$t"); done
  if ! cmake --build "${dir}" -j "${JOBS}" "${targets[@]}"; then
    echo "=== ${name}: build FAILED"
    status=1
    return
  fi
  local selections=()
  if [[ -n "${SUITE_TESTS:-}" ]]; then selections+=("-R ${SUITE_TESTS}"); fi
  if [[ -n "${SUITE_LABEL:-}" ]]; then selections+=("-L ${SUITE_LABEL}"); fi
  if [[ ${#selections[@]} -eq 0 ]]; then selections=(""); fi
  local i
  for i in "${!selections[@]}"; do
    local select=()
    if [[ -n "${selections[$i]}" ]]; then select=("${selections[$i]%% *}" "${selections[$i]#* }"); fi
    echo "=== ${name}: ctest ${select[*]}"
    run_ctest "${name}" "${dir}" "${dir}/ctest${i}.log" "${select[@]}"
  done
}

# run_ctest NAME BUILD_DIR LOG [ctest selection...]: adds its counts.
run_ctest() {
  local name=$1 dir=$2 log=$3
  shift 3
  ctest --test-dir "${dir}" -j "${JOBS}" --output-on-failure "$@" 2>&1 | tee "${log}"
  local rc=${PIPESTATUS[0]}
  # ctest's summary: "100% tests passed, 0 tests failed out of 34"
  local line total nfail
  line=$(grep -E "tests passed, [0-9]+ tests? failed out of [0-9]+" "${log}" | tail -1)
  if [[ -z "${line}" ]]; then
    echo "=== ${name}: ctest printed no summary"
    status=1
    return
  fi
  nfail=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"${line}")
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"${line}")
  passed=$((passed + total - nfail))
  failed=$((failed + nfail))
  # ctest lists them after "The following tests FAILED:" as "\t 12 - name (Failed)".
  local t
  while IFS= read -r t; do
    failed_names+=("${name}: ${t}")
  done < <(sed -n '/The following tests FAILED:/,$p' "${log}" | sed -nE 's/^[[:space:]]+[0-9]+ - (.*)$/\1/p')
  if [[ ${rc} -ne 0 ]]; then status=1; fi
}

# run_fuzzers NAME:TARGET:OUT_DIR...: each libFuzzer target under ASan+UBSan
# (clang 14; fuzz/build_and_run.sh) for 15 seconds, or FUZZ_RUNS (a count of
# runs, or a time such as "300s"); FUZZ_JOBS (default: the cores) at a time,
# each a single-threaded build and run. The 1,000,000-run campaigns are
# fuzz/campaign.sh's, their figures in bench/RESULTS.md.
# Each counts as one test: passed, or failed on a build failure, a crash, a
# sanitizer report or a timeout.
run_fuzzers() {
  local runs=${FUZZ_RUNS:-15s} jobs=${FUZZ_JOBS:-${JOBS}} spec name target dir
  local -a names=() dirs=() pids=()
  for spec in "$@"; do
    IFS=: read -r name target dir <<<"${spec}"
    while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
    echo "=== ${name}: build and run (${dir})"
    mkdir -p "${dir}"
    ( start=${SECONDS}
      ./fuzz/build_and_run.sh "${target}" "${dir}" "${runs}" >"${dir}/fuzz.log" 2>&1
      rc=$?
      echo "${rc} $((SECONDS - start))" >"${dir}/fuzz.rc" ) &
    names+=("${name}"); dirs+=("${dir}"); pids+=($!)
  done
  wait
  local i rc took
  for i in "${!names[@]}"; do
    read -r rc took <"${dirs[$i]}/fuzz.rc" || rc=1
    if [[ ${rc} -eq 0 ]]; then
      grep -E "^(stat::|fuzz:)" "${dirs[$i]}/fuzz.log"
      echo "=== ${names[$i]}: passed (${took} s)"
      passed=$((passed + 1))
    else
      tail -n 60 "${dirs[$i]}/fuzz.log"
      echo "=== ${names[$i]}: FAILED (${dirs[$i]}/fuzz.log)"
      failed=$((failed + 1))
      failed_names+=("${names[$i]}")
      status=1
    fi
  done
}

# Each stage's wall time, printed as it ends and again at the end.
stage_times=()
timed() {
  local name=$1
  shift
  local start=${SECONDS}
  "$@"
  local took=$((SECONDS - start))
  stage_times+=("$(printf '%5d s  %s' "${took}" "${name}")")
  echo "=== ${name}: ${took} s"
}

mkdir -p build
timed "setup + release" run_suite "release" build -DCMAKE_BUILD_TYPE=Release
# ASan+UBSan: every test (stream, producers, analyses, server); TSan: the
# threaded parts only: the stream and host API, then the pipeline thread, the
# simulated workload's threads, the replay thread and the server (the analyses themselves run
# on one thread).
# The sanitizer builds use clang (14, as the fuzzers): it compiles this code
# base 1.4x (-O1) to 3x (-O0) faster than GCC, and a second compiler's
# warnings come with it. The release build, what users run and the
# benchmarks measure, stays GCC's. ASan+UBSan: our libraries -O1, Beast,
# the command line and the test files -O0 (cmake/tools.cmake).
SANITIZER_CXX=${SANITIZER_CXX:-clang++-14}
timed "asan+ubsan" run_suite "asan+ubsan" build/asan -DCMAKE_BUILD_TYPE=Debug -DLIVEPROF_SANITIZE=address \
  -DLIVEPROF_BUILD_BENCH=OFF -DCMAKE_CXX_COMPILER="${SANITIZER_CXX}"
# TSan, one build: the stream and host API tests (label stream), and the
# threaded parts of the rest: their stages' test binaries, built from those
# test files only (LIVEPROF_TEST_FILES). Not the liveprof binary: the
# server's threads are driven by the C++ tests' real clients here, and by
# the Python, WebSocket and browser clients in the release suite.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  SUITE_TARGETS="stream_tests host_api_disabled_tests pipeline_tests web_tests store_tests ingest_tests producers_tests import_tests fleet_tests" \
  SUITE_LABEL=stream \
  SUITE_TESTS="^(pipeline|server|fleet over nats-server|simulated workload|replay|trace store|trace api|trace over the WebSocket|export: (streamed|a slow)|ingest server|ingest sender|import: (gzip|a truncated|a plain)|CUPTI recording)" \
  timed "tsan (stream, pipeline and server)" run_suite "tsan" build/tsan -DCMAKE_BUILD_TYPE=Debug \
  -DLIVEPROF_SANITIZE=thread -DLIVEPROF_BUILD_BENCH=OFF -DLIVEPROF_STREAM_TESTS_ONLY=OFF -DCMAKE_CXX_COMPILER="${SANITIZER_CXX}" \
  "-DLIVEPROF_TEST_FILES=(stream/[a-z_]+|producers/host_api|pipeline/pipeline|web/(server|trace_api|trace_ws|trace_export)|store/(trace_store|derived_rows)|ingest/ingest_(server|sender)|producers/(simulated_workload|cupti_recording)|import/(replay|chunk_reader|cupti_recording_file)|fleet/fleet_nats)_test"
timed "fuzzers (5 x ${FUZZ_RUNS:-15s}, ${FUZZ_JOBS:-${JOBS}} at a time)" run_fuzzers \
  "fuzz (control messages):control_message:build/fuzz" \
  "fuzz (Chrome trace import):chrome_trace:build/fuzz-import" \
  "fuzz (XPlane import):xplane:build/fuzz-xplane" \
  "fuzz (ingest frames):ingest_frame:build/fuzz-ingest" \
  "fuzz (CUPTI records):cupti_records:build/fuzz-cupti"

echo
echo "stage wall times (total ${SECONDS} s):"
printf '  %s\n' "${stage_times[@]}"
if [[ ${#failed_names[@]} -gt 0 ]]; then
  echo "failed:"
  printf '  %s\n' "${failed_names[@]}"
fi
echo "tests: ${passed} passed, ${failed} failed"
if [[ ${status} -ne 0 || ${failed} -ne 0 ]]; then exit 1; fi
