#!/usr/bin/env bash
# The package the way its users install it (docs/python.md), offline:
#   1. `pip install --no-build-isolation .` into a virtual environment of
#      Debian's Python (with its setuptools: --system-site-packages);
#   2. the wheel that builds (py3-none-linux_x86_64) into a virtual
#      environment of the oldest Python supported and the GPU machines'
#      (3.9, 3.12; pyenv's, where found; at least one): one wheel for all
#      (3.10 and 3.13 are checked by hand: bench/RESULTS.md, docs/python.md);
# and in each, the module API test run from outside the source tree.
# Usage: pip_install_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
export LIVEPROF_BUILD_DIR=$2
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT
cd "${tmp}"

/usr/bin/python3 -m venv --system-site-packages debian
debian/bin/pip install -q --no-index --no-build-isolation "${src}"
debian/bin/python "${src}/tests/python/module_api_test.py" 2>&1 | tail -1
debian/bin/python -c "import liveprof, sys; assert liveprof.__file__.startswith('${tmp}'), liveprof.__file__"
echo "ok: pip install . into Debian's $(/usr/bin/python3 -V)"

/usr/bin/python3 -m pip wheel -q --no-index --no-build-isolation --no-deps -w wheels "${src}"
wheel=$(ls wheels/liveprof-*-py3-none-linux_x86_64.whl)
tested=0
for py in $(ls -d "${HOME}"/.pyenv/versions/3.*/bin/python3 2>/dev/null) $(command -v python3); do
  version=$("${py}" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  case ${version} in 3.9|3.12) ;; *) continue ;; esac
  env="v${version}"
  [[ -d ${env} ]] && continue  # (a version seen already)
  "${py}" -m venv "${env}"
  "${env}/bin/pip" install -q --no-index "${wheel}"
  "${env}/bin/python" "${src}/tests/python/module_api_test.py" 2>&1 | tail -1
  echo "ok: $(basename "${wheel}") into Python ${version} (${py})"
  tested=$((tested + 1))
done
[[ ${tested} -gt 0 ]] || { echo "FAIL: no Python 3.9+ besides Debian's found to install the wheel into"; exit 1; }
echo PASS
