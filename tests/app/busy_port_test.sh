#!/bin/sh
# A second liveprof on the port the first one holds: its error (on stderr,
# exit 1) says how to get a free port. Usage: busy_port_test.sh LIVEPROF
bin=$1
log=$(mktemp)
"$bin" demo --port 0 --seconds 20 >"$log" 2>&1 &
first=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's|^listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$log")
  [ -n "$port" ] && break
  sleep 0.1
done
"$bin" demo --port "${port:-1}" --seconds 1
rc=$?
kill "$first" 2>/dev/null
wait "$first" 2>/dev/null
rm -f "$log"
exit "$rc"
