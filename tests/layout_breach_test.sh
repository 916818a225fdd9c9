#!/usr/bin/env bash
# scripts/check_layout.sh on a copy of src/ with one breach of each rule
# planted: it must fail and name each one.
set -euo pipefail
repo=$1
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
cp -r "${repo}/src" "${tmp}/src"
fail() { echo "FAIL: $*"; exit 1; }

# 1. an analysis that includes the pipeline (one direction);
echo '#include "pipeline/pipeline.h"' >> "${tmp}/src/aggregators/steps/steps.cc"
# 2. an analysis that takes a lock;
printf '#include <mutex>\nstatic std::mutex planted_mu;\n' >> "${tmp}/src/aggregators/tf/overview.cc"
# 3. a fifth Beast/Asio translation unit;
echo '#include <boost/asio/io_context.hpp>' >> "${tmp}/src/app/serve.cc"
# 4. a file past 700 lines, in a folder and in a subfolder.
seq 1 701 | sed 's|^|// |' > "${tmp}/src/base/planted_long.h"
seq 1 702 | sed 's|^|// |' > "${tmp}/src/aggregators/alerts/planted_long.h"

set +e
out=$(LAYOUT_ROOT="${tmp}" "${repo}/scripts/check_layout.sh")
rc=$?
set -e
echo "${out}"
[[ ${rc} -eq 1 ]] || fail "exit status ${rc}, not 1"
grep -q 'src/aggregators/steps/steps.cc:[0-9]*: src/aggregators/ includes from pipeline/' <<<"${out}" || fail "include breach not named"
grep -q 'src/aggregators/tf/overview.cc:[0-9]*:.*must not start a thread, take a lock' <<<"${out}" || fail "lock not named"
grep -q 'Beast/Asio in more than 4 translation units.*src/app/serve.cc' <<<"${out}" || fail "fifth Asio TU not named"
grep -q 'src/base/planted_long.h: 701 lines' <<<"${out}" || fail "long file not named"
grep -q 'src/aggregators/alerts/planted_long.h: 702 lines' <<<"${out}" || fail "long file in a subfolder not named"
grep -q 'layout: 6 breach(es)' <<<"${out}" || fail "count is not 6 (the lock breach is two lines)"
echo "PASS"
