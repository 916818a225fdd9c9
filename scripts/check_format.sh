#!/usr/bin/env bash
# Checks that every C++ file of the repository is formatted as .clang-format
# says (clang-format-14: what scripts/setup.sh installs). Exits 1 naming each
# file that is not, with the fix: clang-format-14 -i FILE.
#
#   scripts/check_format.sh          (from anywhere in the clone)
set -uo pipefail
cd "$(dirname "$0")/.."
format=${CLANG_FORMAT:-clang-format-14}
if ! command -v "${format}" >/dev/null; then
  echo "check_format: ${format} is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.c' 2>/dev/null || find src tests bench fuzz examples \
  -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.c')
bad=0
for f in "${files[@]}"; do
  if ! "${format}" --dry-run -Werror "${f}" >/dev/null 2>&1; then
    echo "${f}: not as .clang-format says (fix: ${format} -i ${f})"
    bad=$((bad + 1))
  fi
done
if [[ ${bad} -ne 0 ]]; then
  echo "format: ${bad} of ${#files[@]} files differ"
  exit 1
fi
echo "format: ${#files[@]} files as .clang-format says"
