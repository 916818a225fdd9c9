#!/usr/bin/env bash
# The fuzzing campaigns: every libFuzzer target for a fixed number of runs
# (1,000,000 unless RUNS says otherwise), one after the other, each in
# build/fuzz-campaign/TARGET. CI (scripts/test.sh) runs each target for a
# bounded time instead; this is the long run whose figures go in
# bench/RESULTS.md ("Fuzzing campaigns"). Exits non-zero if any target
# failed (a crash, a sanitizer report, a timeout or a build failure).
#
#   fuzz/campaign.sh [TARGET...]      (all five by default)
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-1000000}
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(control_message chrome_trace xplane ingest_frame cupti_records)
fi
status=0
mkdir -p build/fuzz-campaign
for t in "${targets[@]}"; do
  dir=build/fuzz-campaign/${t}
  if ./fuzz/build_and_run.sh "${t}" "${dir}" "${runs}" >"${dir}.log" 2>&1; then
    verdict=passed
  else
    verdict=FAILED
    status=1
  fi
  execs=$(grep -E "^stat::number_of_executed_units" "${dir}.log" | awk '{print $2}')
  rate=$(grep -E "^stat::average_exec_per_sec" "${dir}.log" | awk '{print $2}')
  took=$(grep -E "^fuzz: exit" "${dir}.log" | sed -E 's/.*after ([0-9]+) s/\1/')
  printf '%-16s %s: %s runs in %s s (%s runs/s)  %s\n' "${t}" "${verdict}" "${execs:-?}" "${took:-?}" \
    "${rate:-?}" "${dir}.log"
done
exit "${status}"
