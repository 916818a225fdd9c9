#!/usr/bin/env bash
# The package the way its users install it (docs/python.md), offline:
#   1. `pip install --no-build-isolation .` into a virtual environment of
#      Debian's Python (with its setuptools: --system-site-packages): the
#      module, and the `liveprof` command in the environment's bin/;
#   2. the wheel that builds (py3-none-linux_x86_64), with the whole command
#      line, into a fresh environment of Debian's Python, used from a folder
#      outside the source and build trees: `liveprof` and `python -m liveprof`
#      run; the program inside resolves every library it links, the ones not
#      a plain Debian 12 with Python has from the package (none from the
#      source or build trees, no libprotobuf or Boost.URL: linked in); and
#      `liveprof run` on an unmodified PyTorch script (examples/pytorch_plain.py)
#      takes the installed bootstrap, package, libliveprof.so and dashboard,
#      and the job's steps reach /api/steps (installed_run_check.py);
#   3. the same wheel into a virtual environment of the oldest Python
#      supported and the GPU machines' (3.9, 3.12; pyenv's, where found; at
#      least one): one wheel for all (3.10 and 3.13 are checked by hand:
#      bench/RESULTS.md, docs/python.md);
# and in each, the module API test run from outside the source tree.
# Usage: pip_install_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
export LIVEPROF_BUILD_DIR=$2
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
cd "${tmp}"
# expect REGEX COMMAND...: what COMMAND prints matches REGEX, or the test fails.
expect() {
  local re=$1 out
  shift
  out=$("$@" 2>&1) || true
  grep -E -q "${re}" <<<"${out}" || { printf 'FAIL: %s: no /%s/ in:\n%s\n' "$*" "${re}" "${out}"; exit 1; }
}

/usr/bin/python3 -m venv --system-site-packages debian
debian/bin/pip install -q --no-index --no-build-isolation "${src}"
debian/bin/python "${src}/tests/python/module_api_test.py" 2>&1 | tail -1
debian/bin/python -c "import liveprof, sys; assert liveprof.__file__.startswith('${tmp}'), liveprof.__file__"
expect '^liveprof [0-9]' debian/bin/liveprof version
echo "ok: pip install . into Debian's $(/usr/bin/python3 -V), with debian/bin/liveprof"

since() { /usr/bin/python3 -c 'import sys; print("%.1f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "${EPOCHREALTIME}"; }
t0=${EPOCHREALTIME}
/usr/bin/python3 -m pip wheel -q --no-index --no-build-isolation --no-deps -w wheels "${src}"
wheel=$(ls wheels/liveprof-*-py3-none-linux_x86_64.whl)
echo "ok: $(basename "${wheel}"): $(($(stat -c %s "${wheel}") / 1024)) KiB, built in $(since "${t0}") s"

# 2. The wheel with the command line, nothing of the build reachable.
unset LIVEPROF_BUILD_DIR LIVEPROF_PYTHON_DIR LIVEPROF_LIBRARY PYTHONPATH
/usr/bin/python3 -m venv --system-site-packages run
t0=${EPOCHREALTIME}
run/bin/pip install -q --no-index "${wheel}"
echo "ok: pip install of the wheel: $(since "${t0}") s"
site=$(run/bin/python -c 'import os, liveprof; print(os.path.realpath(os.path.dirname(os.path.dirname(liveprof.__file__))))')
program=${site}/liveprof/bin/liveprof
expect '^liveprof [0-9]' run/bin/liveprof version
expect 'Subcommands:' run/bin/python -m liveprof --help
expect 'Usage: liveprof run' run/bin/python -m liveprof run --help
echo "ok: run/bin/liveprof and python -m liveprof run ${program}"
ldd_out=$(ldd "${program}")
echo "${ldd_out}" | sed 's/ (0x[0-9a-f]*)$//; s/^/    /'
if grep -q "not found" <<<"${ldd_out}"; then echo "FAIL: a library of ${program} is not found"; exit 1; fi
real_src=$(realpath "${src}")
real_build=$(realpath "$2")
if grep -E -q "=> (${real_src}|${real_build}|${src}|$2)/" <<<"${ldd_out}"; then
  echo "FAIL: ${program} loads a library from the source or build tree"; exit 1
fi
# Every library from the package, or one that any Debian 12 with Python has
# (glibc's, the C++ runtime, zlib, OpenSSL: setup.py's SYSTEM_LIBRARIES).
while read -r name arrow path _; do
  [[ ${arrow} == "=>" ]] || continue
  [[ ${path} == "${site}/liveprof/bin/../lib/"* ]] && continue
  case ${name} in
    libc.so.6 | libm.so.6 | libstdc++.so.6 | libgcc_s.so.1 | libz.so.1 | libssl.so.3 | libcrypto.so.3) ;;
    *) echo "FAIL: ${program} takes ${name} from ${path}: not carried in the package"; exit 1 ;;
  esac
done <<<"${ldd_out}"
for lib in libnats.so libprotobuf-c.so libsimdjson.so; do
  if ! grep -E -q "${lib}[.0-9]* => ${site}/liveprof/bin/../lib/" <<<"${ldd_out}"; then
    echo "FAIL: ${lib} is not taken from the package (${site}/liveprof/lib)"; exit 1
  fi
done
if readelf -d "${program}" | grep -E -q "NEEDED.*(libprotobuf\.so|libboost_url)"; then
  echo "FAIL: ${program} needs libprotobuf or Boost.URL's .so (they are to be linked in)"; exit 1
fi
echo "ok: ${program} resolves every library, those beyond the system's from the package"
# The dashboard served must be the package's copy: a mark in its index.html.
marker="installed-static-$$"
echo "<!-- ${marker} -->" >>"${site}/liveprof/static/index.html"
/usr/bin/python3 "${src}/tests/python/installed_run_check.py" "${tmp}/run/bin/liveprof" "${site}" \
  "${src}/tests/attach/corpus/new_loader_each_epoch.py" "${marker}"

# 3. The same wheel in other Pythons.
tested=0
for py in $(ls -d "${HOME}"/.pyenv/versions/3.*/bin/python3 2>/dev/null) $(command -v python3); do
  version=$("${py}" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  case ${version} in 3.9|3.12) ;; *) continue ;; esac
  env="v${version}"
  [[ -d ${env} ]] && continue  # (a version seen already)
  "${py}" -m venv "${env}"
  "${env}/bin/pip" install -q --no-index "${wheel}"
  "${env}/bin/python" "${src}/tests/python/module_api_test.py" 2>&1 | tail -1
  expect '^liveprof [0-9]' "${env}/bin/liveprof" version
  expect '^liveprof [0-9]' "${env}/bin/python" -m liveprof version
  echo "ok: $(basename "${wheel}") into Python ${version} (${py}), with ${env}/bin/liveprof"
  tested=$((tested + 1))
done
[[ ${tested} -gt 0 ]] || { echo "FAIL: no Python 3.9+ besides Debian's found to install the wheel into"; exit 1; }
echo PASS
