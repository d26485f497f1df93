#!/usr/bin/env bash
# Four C++ clients (examples/counter, built as build/examples/counter/counter)
# each add one to the same counter 50 times by read, +1, PUT with If-Match,
# reading again after a 412. The counter ends at 200: no increment lost.
#
#   examples/counter.sh
#
# It starts its own fencepost on ephemeral ports of 127.0.0.1.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
. "$(dirname "$0")/lib.sh"
counter=${COUNTER:-}
if [ -z "$counter" ]; then
  counter=$(built counter examples/counter/counter) || exit 2
fi
start_server

pids=()
for who in 1 2 3 4; do
  "$counter" "$FENCEPOST_DATA" jobs/count 7 50 >"$server_dir/$who.out" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid" || { echo "a counter failed" >&2; cat "$server_dir"/*.out >&2; exit 1; }
done
cat "$server_dir"/[1-4].out
total=$(curl -sf "$FENCEPOST_DATA/jobs/count")
echo "the counter is $total"
[ "$total" = 200 ] || { echo "increments were lost: expected 200" >&2; exit 1; }
