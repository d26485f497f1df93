#!/usr/bin/env bash
# Renewal apart from work, with `fencepost lease run` (TTL 1 s):
#  1. a job that blocks for 3 s (three TTLs) keeps its lease: lease run
#     renews on its own thread, so the token stays and the job ends normally;
#  2. when renewals cannot get through (the server is frozen with SIGSTOP),
#     lease run stops the job before the lease (TTL 3 s) could run out on
#     the server: by its own clock, less a margin (a tenth of the TTL), after
#     the send time of its last successful renewal.
#
#   examples/renewal.sh
#
# It starts its own fencepost on ephemeral ports of 127.0.0.1.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
. "$(dirname "$0")/lib.sh"
start_server
now_ms() { date +%s%3N; }

echo "1. a job that blocks for 3 s under a 1 s lease"
status=0
"$fencepost" lease run demo/renewal --holder blocker --ttl 1s -- sleep 3 \
  2>"$server_dir/run1.err" || status=$?
renewals=$(curl -s "$FENCEPOST_ADMIN/metrics" |
  sed -n 's/^fencepost_lease_renewals_total //p')
grants=$(curl -s "$FENCEPOST_ADMIN/metrics" |
  sed -n 's/^fencepost_lease_grants_total //p')
echo "   the job exited $status; $grants grant, $renewals renewals meanwhile"
if [ "$status" != 0 ] || [ "$grants" != 1 ] || [ "${renewals%.*}" -lt 3 ]; then
  echo "the lease was not kept while the job blocked" >&2
  cat "$server_dir/run1.err" >&2
  exit 1
fi

echo "2. the server stops answering while a job runs under a 3 s lease"
# The job notes the moment it is told to stop (bash's clock, no fork), which
# is what must come before the lease runs out on the server.
stopped_file="$server_dir/stopped"
job='trap "kill \$! 2>/dev/null; echo \${EPOCHREALTIME/./} >\"$0\"; exit 143" TERM
sleep 30 & wait'
"$fencepost" lease run demo/renewal --holder starved --ttl 3s --grace 1s \
  -- bash -c "$job" "$stopped_file" 2>"$server_dir/run2.err" &
run=$!
for _ in $(seq 1 500); do
  grep -q 'acquired' "$server_dir/run2.err" && break
  sleep 0.01
done
freeze_after_renewal demo/renewal
# The lease would run out on the server 3 s after that renewal.
status=0
wait "$run" || status=$?
exited=$(now_ms)
kill -CONT "$server_pid"
stopped=$(( $(cat "$stopped_file" 2>/dev/null || echo 0) / 1000 ))
echo "   the job was told to stop $((stopped - frozen)) ms after the server froze,"
echo "   $((renewed_ms + 3000 - stopped)) ms before the lease would have run out on the server;"
echo "   lease run exited $status $((exited - stopped)) ms later"
echo "   $(grep 'lease lost' "$server_dir/run2.err")"
if [ "$status" != 75 ] || [ "$stopped" -le 0 ] ||
   [ "$stopped" -ge $((renewed_ms + 3000)) ]; then
  echo "the job was not stopped before the lease could run out" >&2
  cat "$server_dir/run2.err" >&2
  exit 1
fi
