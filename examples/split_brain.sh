#!/usr/bin/env bash
# Split brain, reproduced and fixed. Leader A runs its job under
# `fencepost lease run` (TTL 1 s), writing orders/1 through the data port in
# a loop. A is frozen with SIGSTOP (a GC pause, a stalled VM) past its TTL.
# B is granted the lease with the next token and writes orders/1. A is
# resumed with SIGCONT and goes on writing with its old token.
#
#   FENCEPOST=build/proxy/fencepost examples/split_brain.sh [enforce|observe]
#
# With `enforce` (the default), B's grant raised the fence of orders/ (the
# server runs with --fence-scope orders/, so the lease orders/leader and the
# key orders/1 share one fence): every write A makes after the pause is
# refused with 409 and B's value stands. With `observe`, fencepost only
# counts the stale writes and stores them: A's write replaces B's, which is
# the bug fencing prevents.
#
# It starts its own fencepost on ephemeral ports of 127.0.0.1 and prints
# what happened; it exits 0 when the story went as described for the mode.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
mode=${1:-enforce}
start_server --fence-scope orders/ --mode "$mode"
export JOB_LOG=$server_dir/job.log
touch "$JOB_LOG"
job=$(cd "$(dirname "$0")" && pwd)/split_brain_job.sh

# A, in its own process group so that one signal freezes the runner and
# its job together, as a pause of the whole machine would.
setsid "$fencepost" lease run orders/leader --holder A --ttl 1s --grace 2s \
  -- "$job" A 2>"$server_dir/a.err" &
a_pid=$!
for _ in $(seq 1 500); do
  grep -q '^A 20[01] ' "$JOB_LOG" && break
  sleep 0.01
done
a_token=$(grep -m1 '^A 20[01] ' "$JOB_LOG" | cut -d' ' -f3)
echo "A leads with token $a_token and writes orders/1"

kill -STOP -- "-$a_pid"
echo "A is frozen (SIGSTOP) for 1.5 s, past its 1 s TTL"
sleep 1.5

b=$("$fencepost" lease acquire orders/leader --holder B --ttl 10s)
granted=$(date +%s%N)
b_token=$(field token "$b")
echo "B is granted the lease with token $b_token"
b_code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT \
  -H "Fencing-Token: $b_token" --data 'B: shipped' "$FENCEPOST_DATA/orders/1")
echo "B writes orders/1: $b_code"

kill -CONT -- "-$a_pid"
echo "A resumes (SIGCONT), still believing it leads"
a_status=0
wait "$a_pid" || a_status=$?
echo "A's lease run exited $a_status: $(tail -n1 "$server_dir/a.err")"
# A's writes sent after B's grant (A was frozen from before the grant).
after=$(awk -v t="$granted" '$4 > t' "$JOB_LOG")
echo "A's writes sent after B's grant (holder, status, token, sent, body):"
sed 's/^/  /' <<<"$after"
value=$(curl -s "$FENCEPOST_DATA/orders/1")
echo "orders/1 = $value"
curl -s "$FENCEPOST_ADMIN/metrics" |
  grep -E '^fencepost_(writes_rejected_total\{reason="stale_token"\}|writes_would_reject_total|lease_grants_total|lease_expirations_total) ' |
  sed 's/^/  /'

stale=$(grep -c '^A 409 ' <<<"$after" || true)
landed=$(grep -c '^A 20[0-9] ' <<<"$after" || true)
if [ "$mode" = enforce ]; then
  [ "$value" = 'B: shipped' ] && [ "$stale" -ge 1 ] && [ "$landed" = 0 ] &&
    [ "$a_status" = 75 ] && echo "the fence held: A's stale writes were refused" &&
    exit 0
else
  [ "$value" != 'B: shipped' ] && [ "$landed" -ge 1 ] &&
    echo "without enforcement A's stale write replaced B's: split brain" &&
    exit 0
fi
echo "the story did not go as expected for mode $mode" >&2
exit 1
