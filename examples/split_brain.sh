#!/usr/bin/env bash
# Split brain, reproduced and fixed. Leader A runs its job under
# `fencepost lease run` (TTL 1 s), writing orders/1 through the data port in
# a loop. A is frozen with SIGSTOP (a GC pause, a stalled VM) past its TTL.
# B is granted the lease with the next token and writes orders/1. A is
# resumed with SIGCONT and goes on writing with its old token.
#
#   examples/split_brain.sh [enforce|observe|replicas|push]
#
# With `enforce` (the default), B's grant raised the fence of orders/ (the
# server runs with --fence-scope orders/, so the lease orders/leader and the
# key orders/1 share one fence): every write A makes after the pause is
# refused with 409 and B's value stands. With `observe`, fencepost only
# counts the stale writes and stores them: A's write replaces B's, which is
# the bug fencing prevents. With `replicas`, the same story as `enforce`
# through three fencepost replicas that share fences and leases in a
# 3-member etcd cluster (tests/coordination/etcd_cluster.sh starts it on
# free ports of 127.0.0.1; etcd-server is installed by scripts/deps.sh,
# which the script runs when etcd is missing): A is granted and
# writes through the first replica, B is granted and writes through the
# third, the value is read through the second, and the counters are summed
# over the three. With `push`, A holds the lease with a 30 s TTL and is not
# frozen: an operator fences it out (`fencepost fence bump`) and B is
# granted the lease at once; A's `lease run` watches its fence and stops
# its job within a round trip of the bump, not at its next renewal 10 s
# later (the time is printed). In every mode but `replicas`, a `fencepost
# watch orders/` runs beside the story, as a second terminal would, and
# what it printed is shown at the end: the grants and the refused writes as
# they happened.
#
# It starts its own fencepost on ephemeral ports of 127.0.0.1, prints what
# happened, and checks it: B's token is A's + 1 (a grant's token is 1 +
# max(the lease's token, the fence's token), and A only ever wrote with its
# own), the server counted two grants and A's expiry, and, by mode, the
# stale write was refused and counted (enforce) or landed and was counted
# as one enforce would refuse (observe). It exits 0 when the story went as
# described for the mode, and 1 with what went otherwise.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
. "$(dirname "$0")/lib.sh"
mode=${1:-enforce}
case $mode in
  enforce | observe | replicas | push) ;;
  *) echo "usage: $0 [enforce|observe|replicas|push]" >&2 && exit 2 ;;
esac
etcd_cluster=$(cd "$(dirname "$0")/.." && pwd)/tests/coordination/etcd_cluster.sh
replica_pids=()
# start_replicas N ENDPOINTS: N replicas over etcd, their URLs in admins
# and datas (server_dir holds their logs, as start_server's would).
start_replicas() {
  local i line
  for i in $(seq 1 "$1"); do
    serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
      --fence-store "etcd://$2/split-brain" --backend etcd \
      --fence-scope orders/ 2>"$server_dir/replica-$i.log" &
    replica_pids+=($!)
    line=""
    for _ in $(seq 1 500); do
      line=$(grep -m1 ' listening .*event=started' "$server_dir/replica-$i.log" || true)
      [ -n "$line" ] && break
      sleep 0.01
    done
    [ -n "$line" ] || {
      cat "$server_dir/replica-$i.log" >&2
      exit 1
    }
    datas+=("http://$(sed -n 's/.* data=\([^ ]*\) .*/\1/p' <<<"$line")")
    admins+=("http://$(sed -n 's/.* admin=\([^ ]*\) .*/\1/p' <<<"$line")")
  done
}
admins=()
datas=()
if [ "$mode" = replicas ]; then
  needs etcd python3  # etcd-server; etcd_cluster.sh picks ports with python3
  server_dir=$(mktemp -d)
  endpoints=$("$etcd_cluster" start "$server_dir/etcd")
  [ -n "$endpoints" ] || { echo "etcd did not start" >&2 && exit 1; }
  stop_server() {
    for pid in "${replica_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    "$etcd_cluster" stop "$server_dir/etcd" >/dev/null 2>&1 || true
    rm -rf "$server_dir"
  }
  trap stop_server EXIT
  start_replicas 3 "$endpoints"
  echo "three replicas over a 3-member etcd cluster ($endpoints)"
else
  start_server --fence-scope orders/ --mode "${mode/push/enforce}"
  admins=("$FENCEPOST_ADMIN")
  datas=("$FENCEPOST_DATA")
  # The second terminal: every change under orders/ as it happens.
  "$fencepost" watch orders/ >"$server_dir/watch.out" 2>&1 &
  watch_pid=$!
  # The story starts once the stream is open, so the terminal sees it all.
  for _ in $(seq 100); do
    curl -s "$FENCEPOST_ADMIN/metrics" | grep -q '^fencepost_watchers [1-9]' && break
    sleep 0.1
  done
fi
# A through the first replica, B through the last, reads through the middle.
a_admin=${admins[0]} a_data=${datas[0]}
b_admin=${admins[-1]} b_data=${datas[-1]}
read_data=${datas[$((${#datas[@]} / 2))]}
export JOB_LOG=$server_dir/job.log
touch "$JOB_LOG"
job=$(cd "$(dirname "$0")" && pwd)/split_brain_job.sh

# die WHAT: the story cannot go on. fail WHAT: it went otherwise than
# described; the checks go on, so that every difference is reported.
die() {
  echo "split_brain.sh $mode: $*" >&2
  exit 1
}
failures=0
fail() {
  echo "split_brain.sh $mode: FAILED: $*" >&2
  failures=$((failures + 1))
}

# Whatever happens, no frozen A is left behind (a failed check would
# otherwise leave A's process groups stopped for good).
a_pid=
stop_a() {
  if [ -n "$a_pid" ]; then
    signal_lease_run CONT "$a_pid"
    signal_lease_run TERM "$a_pid"
  fi
}
watch_pid=${watch_pid:-}
stop_watch() {
  [ -z "$watch_pid" ] || { kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null; } || true
}
trap 'stop_a; stop_watch; stop_server' EXIT
# show_watch: what the watch terminal printed.
show_watch() {
  [ -n "$watch_pid" ] || return 0
  sleep 0.2
  echo "the watch terminal (fencepost watch orders/) printed:"
  sed 's/^/  /' "$server_dir/watch.out"
}
# start_a TTL: A, under `lease run` with TTL, in its own process group so
# that signal_lease_run freezes the runner and its job (in a group of its
# own) together, as a pause of the whole machine would; waits for A's
# first accepted write and sets a_pid and a_token.
start_a() {
  FENCEPOST_ADMIN=$a_admin FENCEPOST_DATA=$a_data setsid \
    "$fencepost" lease run orders/leader --holder A --ttl "$1" --grace 2s \
    -- "$job" A 2>"$server_dir/a.err" &
  a_pid=$!
  for _ in $(seq 1 500); do
    grep -q '^A 20[01] ' "$JOB_LOG" && break
    sleep 0.01
  done
  a_token=$(grep -m1 '^A 20[01] ' "$JOB_LOG" | cut -d' ' -f3 || true)
  [[ $a_token =~ ^[0-9]+$ ]] ||
    die "A wrote nothing within 5 s: $(cat "$server_dir/a.err" "$JOB_LOG")"
}
[ "$mode" != push ] || . "$(dirname "$0")/split_brain_push.sh"

start_a 1s
echo "A leads with token $a_token and writes orders/1"

signal_lease_run STOP "$a_pid"
echo "A is frozen (SIGSTOP) for 1.5 s, past its 1 s TTL"
sleep 1.5

# (Through etcd a 1 s lease may live longer: about 1.6 s on the cluster
# etcd_cluster.sh starts, about 2.5 s with etcd's default election timeout.
# B waits for it.)
b=$("$fencepost" lease acquire orders/leader --holder B --ttl 10s \
  --wait 5s --admin "$b_admin") ||
  die "B was not granted the lease after A's ran out"
granted=$(date +%s%N)
b_token=$(field token "$b")
echo "B is granted the lease with token $b_token"
b_code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT \
  -H "Fencing-Token: $b_token" --data 'B: shipped' "$b_data/orders/1")
echo "B writes orders/1: $b_code"

signal_lease_run CONT "$a_pid"
echo "A resumes (SIGCONT), still believing it leads"
a_status=0
wait "$a_pid" || a_status=$?
a_pid=
# What A's lease run said about the lease: the line that explains its
# exit status, not its last line (about how the command ended).
a_said=$(grep -m1 'lease lost' "$server_dir/a.err" || tail -n1 "$server_dir/a.err")
echo "A's lease run exited $a_status: $a_said"
# A's writes sent after B's grant (A was frozen from before the grant).
after=$(awk -v t="$granted" '$4 > t' "$JOB_LOG")
echo "A's writes sent after B's grant (holder, status, token, sent, body):"
sed 's/^/  /' <<<"$after"
value=$(curl -s "$read_data/orders/1")
echo "orders/1 = $value"
# Every replica's counters, summed by name.
metrics=$(for admin in "${admins[@]}"; do curl -s "$admin/metrics"; done |
  awk '/^fencepost_/ {
         if (!($1 in sum)) order[++n] = $1
         sum[$1] += $2
       }
       END { for (i = 1; i <= n; i++) print order[i], sum[order[i]] }')
grep -E '^fencepost_(writes_rejected_total\{reason="stale_token"\}|writes_would_reject_total|lease_grants_total|lease_expirations_total) ' \
  <<<"$metrics" | sed 's/^/  /' || true

# metric_at_least SAMPLE MIN WHY: SAMPLE is a metric's name with its labels
# as /metrics prints them, e.g. fencepost_writes_rejected_total{reason="stale_token"}.
metric_at_least() {
  local value
  value=$(awk -v n="$1" '$1 == n {print $2; exit}' <<<"$metrics")
  if [ -z "$value" ] ||
    ! awk -v v="$value" -v m="$2" 'BEGIN {exit !(v + 0 >= m)}'; then
    fail "$1 is ${value:-missing from /metrics}, expected at least $2: $3"
  fi
}

# Both modes. A grant's token is 1 + max(the lease's token, the fence's
# token), and the fence of orders/ only ever saw A's token (the lease's
# own), so B's token is exactly A's + 1.
other_tokens=$(awk -v t="$a_token" '$1 == "A" && $3 != t' "$JOB_LOG")
[ -z "$other_tokens" ] ||
  fail "A wrote with a token other than its lease's $a_token: $other_tokens"
[ "$b_token" = $((a_token + 1)) ] ||
  fail "B's token is '$b_token', expected $((a_token + 1)): 1 + max(lease token, fence token), both A's $a_token"
[ "$b_code" = 200 ] || fail "B's write of orders/1 got $b_code, expected 200"
# A's lease (granted) ran out while A was frozen; B's acquire (the second
# grant) noticed and counted that expiry. Leases are the same in both modes.
metric_at_least fencepost_lease_grants_total 2 "A's grant and B's"
metric_at_least fencepost_lease_expirations_total 1 \
  "A's lease ran out unrenewed and B's acquire noticed it"

stale=$(grep -c '^A 409 ' <<<"$after" || true)
landed=$(grep -c '^A 20[0-9] ' <<<"$after" || true)
if [ "$mode" != observe ]; then
  # B's grant raised the fence to B's token: A's writes with its old token
  # are refused, counted as stale, and B's value stands. A's `lease run`
  # learns it lost the lease and exits 75.
  [ "$stale" -ge 1 ] || fail "no write A sent after B's grant was refused with 409"
  [ "$landed" = 0 ] || fail "$landed of A's writes after B's grant landed"
  [ "$value" = 'B: shipped' ] || fail "orders/1 is '$value', expected B's 'B: shipped'"
  [ "$a_status" = 75 ] || fail "A's lease run exited $a_status, expected 75 (lease lost)"
  [[ $a_said == *"lease lost"* ]] ||
    fail "what the story prints of A's lease run does not say the lease was lost: $a_said"
  metric_at_least 'fencepost_writes_rejected_total{reason="stale_token"}' 1 \
    "A's write with token $a_token after B's grant (token $b_token)"
else
  # Only counted: A's stale write is stored over B's.
  [ "$landed" -ge 1 ] || fail "none of A's writes after B's grant landed"
  [ "$value" != 'B: shipped' ] || fail "orders/1 is still B's value"
  metric_at_least fencepost_writes_would_reject_total 1 \
    "A's write with token $a_token after B's grant (token $b_token)"
fi
show_watch
if [ -n "$watch_pid" ] && [ "$mode" = enforce ]; then
  grep -q '"event":"lease".*"holder":"B".*"change":"granted"' "$server_dir/watch.out" ||
    fail "the watch terminal did not show B's grant"
  grep -q '"event":"rejection".*"presented_token":'"$a_token" "$server_dir/watch.out" ||
    fail "the watch terminal did not show A's refused write"
fi
if [ "$failures" != 0 ]; then
  echo "the story did not go as expected for mode $mode ($failures checks failed)" >&2
  exit 1
fi
if [ "$mode" = replicas ]; then
  echo "the fence held across replicas: A's stale writes were refused"
elif [ "$mode" = enforce ]; then
  echo "the fence held: A's stale writes were refused"
else
  echo "without enforcement A's stale write replaced B's: split brain"
fi
