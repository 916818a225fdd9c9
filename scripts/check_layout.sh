#!/usr/bin/env bash
# The layout's rules (docs/architecture.md, "Layout"), checked on the sources:
#   1. one direction: each folder of src/ includes only from the folders it
#      may depend on;
#   2. the analyses stay pure: nothing in src/aggregators/ (or its
#      subfolders) starts a thread, takes a lock or touches a file;
#   3. Beast and Asio in at most 4 translation units;
#   4. no source file past 700 lines;
#   5. README.md's tables name every src/ folder and every subcommand;
#   6. no source or document cites an issue number.
# Every check reads the folders' subfolders too (src/aggregators/steps/...).
# Prints each breach as FILE:LINE: what, and exits 1 if there is any.
set -uo pipefail
cd "${LAYOUT_ROOT:-$(dirname "$0")/..}"  # (LAYOUT_ROOT: another tree, for its test)

# The C++ sources of src/ (one folder, or all), subfolders included.
sources() { find "${1:-src}" -type f \( -name '*.h' -o -name '*.cc' \) | sort; }

# folder -> the project folders its files may include from (itself always).
declare -A allowed=(
  [base]=""
  [stream]="base"
  [producers]="base stream"
  [ingest]="base stream producers"
  [aggregators]="base stream"
  [store]="base stream"
  [pipeline]="base stream aggregators store"
  [import]="base stream producers aggregators store pipeline"
  [web]="base stream aggregators store pipeline"
  [fleet]="base stream aggregators store pipeline"
  [attach]="base stream producers ingest"
  [app]="base stream producers ingest aggregators store pipeline import web fleet"
)
folders="base stream producers ingest aggregators store pipeline import web fleet attach app"

breaches=0
for folder in ${folders}; do
  [[ -d src/${folder} ]] || { echo "src/${folder}: missing"; breaches=$((breaches + 1)); continue; }
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    included=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"${rest#*:}")
    [[ ${included} == "${folder}" ]] && continue
    if [[ " ${allowed[${folder}]} " != *" ${included} "* ]]; then
      echo "${file}:${line}: src/${folder}/ includes from ${included}/ (allowed: ${allowed[${folder}]:-nothing})"
      breaches=$((breaches + 1))
    fi
  done < <(sources src/"${folder}" | xargs -r grep -nHE '^#include "[a-z_]+/')
done

# The analyses: no thread, no lock, no file.
while IFS= read -r hit; do
  echo "${hit}: src/aggregators/ must not start a thread, take a lock or touch a file"
  breaches=$((breaches + 1))
# (<cstdio> is allowed: snprintf formats numbers; FILE* and fopen are not.)
done < <(grep -nHE '#include <(thread|mutex|shared_mutex|condition_variable|future|fstream|fcntl\.h|unistd\.h|pthread\.h|filesystem)>|std::(thread|jthread|mutex|shared_mutex|lock_guard|unique_lock|scoped_lock|async|ifstream|ofstream|fstream)\b|\b(fopen|fdopen|popen|pthread_create)\(|FILE \*|::(open|read|write)\(' \
  $(sources src/aggregators))

# Beast and Asio in at most 4 translation units (docs/architecture.md, "Layout"): their headers
# cost each TU that includes them ~30 s to build.
asio_headers=$(sources | grep '\.h$' | xargs -r grep -lE '#include <boost/(beast|asio)' | xargs -r -n1 basename)
asio_tus=$(sources | grep '\.cc$' |
  xargs -r grep -lE "#include <boost/(beast|asio)${asio_headers:+|#include \"[a-z_/]+/($(tr '\n' '|' <<<"${asio_headers}" | sed 's/|$//; s/\./\\./g'))\"}")
if [[ $(wc -w <<<"${asio_tus}") -gt 4 ]]; then
  echo "Beast/Asio in more than 4 translation units (docs/architecture.md, "Layout"): ${asio_tus//$'\n'/ }"
  breaches=$((breaches + 1))
fi

# Files a newcomer can read top to bottom: split past 700 lines.
while read -r lines file; do
  [[ ${file} == total ]] && continue
  if [[ ${lines} -gt 700 ]]; then
    echo "${file}: ${lines} lines (split past 700, docs/architecture.md)"
    breaches=$((breaches + 1))
  fi
done < <(sources | xargs -r wc -l)

# A doctest case is a ctest test of the same name (doctest_discover_tests),
# and CMake splits a name at ';' into two tests that each run nothing.
while IFS= read -r hit; do
  echo "${hit%%:TEST_CASE*}: a TEST_CASE name with ';' (ctest splits it in two)"
  breaches=$((breaches + 1))
done < <(grep -rnE 'TEST_CASE(_FIXTURE\([^,"]*, *|\()"[^"]*;' tests --include='*.cc' 2>/dev/null || true)

# README.md's tables name every folder of src/ and every subcommand of
# `liveprof`, read from src/app/'s add_subcommand calls (no build needed).
# Skipped for a tree without a README (the breach test's copy of src/).
if [[ -f README.md ]]; then
  for dir in src/*/; do
    grep -qE "^\| *\`${dir}\`" README.md ||
      { echo "README.md: the layout table has no row for ${dir}"; breaches=$((breaches + 1)); }
  done
  # A subcommand's name is a string literal, or a call to a function of
  # src/app/ whose returns are literals (ModeName: demo, serve, run...).
  commands=$(perl -e '
    my %src;
    for my $f (@ARGV) { open(my $h, "<", $f) or next; local $/; $src{$f} = <$h>; }
    my $all = join("\n", values %src);
    for my $f (sort keys %src) {
      while ($src{$f} =~ /add_subcommand\(\s*(?:"([^"]+)"|([^,]+?)\s*,)/g) {
        if (defined $1) { print "$1\n"; next; }
        my $expr = $2;
        my ($fn) = $expr =~ /(\w+)\s*\([^()]*\)\s*\)?\s*$/;
        my @names;
        if (defined $fn && $all =~ /\b\Q$fn\E\([^;{)]*\)\s*(?:const\s*)?\{(.*?)\n\}/s) {
          my $body = $1;
          push @names, $1 while $body =~ /return\s+"([^"]+)"\s*;/g;
        }
        print @names ? join("", map { "$_\n" } @names) : "?$f: add_subcommand($expr)\n";
      }
    }' src/app/*.cc | sort -u)
  [[ -n ${commands} ]] ||
    { echo "src/app/: no add_subcommand found (this check reads the commands there)"; breaches=$((breaches + 1)); }
  while IFS= read -r command; do
    [[ -z ${command} ]] && continue
    if [[ ${command} == \?* ]]; then
      echo "${command#\?}: cannot tell this subcommand's name (a literal, or a src/app/ function returning literals)"
      breaches=$((breaches + 1))
    elif ! grep -qE "^\| *\`${command}\` *\|" README.md; then
      echo "README.md: the command table has no row for \`${command}\` (a subcommand in src/app/)"
      breaches=$((breaches + 1))
    fi
  done <<<"${commands}"
elif [[ -z ${LAYOUT_ROOT:-} ]]; then
  echo "README.md: missing"
  breaches=$((breaches + 1))
fi

# No source or document cites an issue number: say what a thing is, not
# which issue asked for it. bench/RESULTS.md's dated entries and
# bench/history/ are a record and keep theirs.
issue_re='\b[Ii]ssues? #?[0-9]+|(^|[^[:alnum:]_#])#[0-9]+\)'
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  echo "${file}:${rest%%:*}: cites an issue number (say what it is instead)"
  breaches=$((breaches + 1))
done < <(grep -rnE "${issue_re}" README.md CMakeLists.txt src tests docs static scripts bench fuzz examples deploy cmake \
  --include='*.'{h,cc,cpp,cu,py,js,mjs,md,sh,cmake,txt,fbs,proto,html,css,yml,toml} --exclude-dir=node_modules 2>/dev/null |
  grep -vE '^bench/(RESULTS\.md|history/)' || true)

if [[ ${breaches} -ne 0 ]]; then
  echo "layout: ${breaches} breach(es)"
  exit 1
fi
echo "layout: one-direction includes, pure analyses, <= 4 Asio TUs, <= 700 lines hold; README names every folder and command; no issue numbers ($(sources | wc -l) files)"
