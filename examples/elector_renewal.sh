#!/usr/bin/env bash
# Renewal apart from work, with the C++ LeaderElector (examples/leader):
#  1. a leader whose work blocks for 3 s (three TTLs of 1 s) right after it
#     is elected keeps its lease: the elector renews on its own thread, so
#     when the work wakes up its token is still current and its write lands;
#  2. when renewals cannot get through (the server is frozen with SIGSTOP),
#     the elector fires the work's stop signal before the lease (TTL 3 s)
#     could run out on the server: by its own clock, less a margin (a tenth
#     of the TTL), after the send time of its last successful renewal.
#
#   examples/elector_renewal.sh
#
# It starts its own fencepost on ephemeral ports of 127.0.0.1.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
. "$(dirname "$0")/lib.sh"
leader=${LEADER:-}
if [ -z "$leader" ]; then
  leader=$(built leader examples/leader/leader) || exit 2
fi
start_server
metric() { curl -s "$FENCEPOST_ADMIN/metrics" | sed -n "s/^$1 //p"; }

echo "1. a leader whose work blocks for 3 s under a 1 s lease"
"$leader" demo/blocker demo/blocker-progress "$FENCEPOST_ADMIN" \
  "$FENCEPOST_DATA" 1000 3000 >"$server_dir/blocker.out" 2>&1 &
blocker=$!
wait_for "$server_dir/blocker.out" '^wrote '
kill -TERM "$blocker"
wait "$blocker"
renewals=$(metric fencepost_lease_renewals_total)
grants=$(metric fencepost_lease_grants_total)
echo "   $(grep -m1 '^elected ' "$server_dir/blocker.out"), then after 3 s:" \
  "$(grep -m1 '^wrote ' "$server_dir/blocker.out")"
echo "   $grants grant, $renewals renewals meanwhile"
if [ "$grants" != 1 ] || [ "${renewals%.*}" -lt 3 ] ||
   ! grep -q '^wrote demo/blocker-progress [0-9]* 201$' \
     "$server_dir/blocker.out" ||
   [ "$(grep -c '^stop ' "$server_dir/blocker.out")" != 1 ] ||
   [ "$(grep -c '^elected ' "$server_dir/blocker.out")" != 1 ]; then
  echo "the lease was not kept while the work blocked" >&2
  cat "$server_dir/blocker.out" >&2
  exit 1
fi

echo "2. the server stops answering while a leader works under a 3 s lease"
"$leader" demo/starved demo/starved-progress "$FENCEPOST_ADMIN" \
  "$FENCEPOST_DATA" 3000 >"$server_dir/starved.out" 2>&1 &
starved=$!
wait_for "$server_dir/starved.out" '^wrote '
freeze_after_renewal demo/starved
# The lease would run out on the server 3 s after that renewal.
for _ in $(seq 1 1000); do
  grep -q '^stop ' "$server_dir/starved.out" && break
  sleep 0.01
done
kill -CONT "$server_pid"
stopped=$(sed -n 's/^stop [0-9]* //p' "$server_dir/starved.out")
kill -TERM "$starved"
wait "$starved" || true
echo "   the work was told to stop $((stopped - frozen)) ms after the server froze,"
echo "   $((renewed_ms + 3000 - stopped)) ms before the lease would have run out on the server"
echo "   $(grep -m1 '^lost ' "$server_dir/starved.out")"
if [ -z "$stopped" ] || [ "$stopped" -ge $((renewed_ms + 3000)) ]; then
  echo "the work was not stopped before the lease could run out" >&2
  cat "$server_dir/starved.out" >&2
  exit 1
fi
