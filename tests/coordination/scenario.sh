#!/usr/bin/env bash
# The leader stories with real processes, elected through a real
# coordination system: `fencepost lease run --via URL` campaigns on etcd,
# ZooKeeper or PostgreSQL (or fencepost's own leases), and the leader's job
# writes through a real fencepost with the token it was given.
#
#   FENCEPOST=build/proxy/fencepost tests/coordination/scenario.sh BACKEND SCENARIO
#
# BACKEND: fencepost, etcd, zookeeper or postgres (started here on free
# ports of 127.0.0.1 by tests/coordination/BACKEND.sh, and stopped).
# SCENARIO:
#   race         8 processes campaign at once, ROUNDS times (default 5):
#                each runs its job while it leads; the jobs never overlap,
#                every later leader's token is higher, and the first winner
#                differs across rounds.
#   split_brain  leader A is frozen with SIGSTOP until its lease runs out in
#                that system; B is elected with a higher token, raises the
#                fence of orders/1 to it (lease run --fence) and writes;
#                A is resumed and its writes are refused with 409 and land
#                nowhere. Prints the failover time (A frozen -> B's job
#                started) for a 2 s TTL.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
backend=${1:?BACKEND: fencepost, etcd, zookeeper or postgres}
scenario=${2:?SCENARIO: race or split_brain}
. "$here/../../examples/lib.sh"

start_server
# Its own folder that other users may enter: PostgreSQL runs as its user.
coord_root=$(mktemp -d)
chmod 755 "$coord_root"
coord_dir=$coord_root/$backend
via=""
if [ "$backend" != fencepost ]; then
  via=$("$here/$backend.sh" start "$coord_dir")
fi
stop_all() {
  for pid in $(jobs -p); do signal_lease_run CONT "$pid"; done
  [ "$backend" = fencepost ] || "$here/$backend.sh" stop "$coord_dir" || true
  rm -rf "$coord_root"
  stop_server
}
trap stop_all EXIT
export FENCEPOST_VIA=$via
echo "elections through $backend${via:+ ($via)}"
now_ns() { date +%s%N; }

race() {
  local rounds=${1:-5} workers=8
  local firsts=()
  for round in $(seq 1 "$rounds"); do
    local dir=$server_dir/race.$round
    mkdir "$dir"
    local pids=()
    for i in $(seq 1 "$workers"); do
      (
        while [ ! -e "$dir/go" ]; do sleep 0.002; done
        sleep "$(printf '0.%03d' $((RANDOM % 40)))"
        rc=0
        "$fencepost" lease run "race/$round" --holder "w$i" --ttl 2s -- \
          sh -c 'echo "$(date +%s%N) start $FENCEPOST_HOLDER $FENCING_TOKEN" >>"$0"
                 sleep 0.1
                 echo "$(date +%s%N) end $FENCEPOST_HOLDER $FENCING_TOKEN" >>"$0"' \
          "$dir/log" 2>"$dir/err.$i" || rc=$?
        echo "$rc" >"$dir/rc.$i"
      ) &
      pids+=($!)
    done
    sleep 0.05
    touch "$dir/go"
    wait "${pids[@]}"
    for i in $(seq 1 "$workers"); do
      if [ "$(cat "$dir/rc.$i")" != 0 ]; then
        echo "round $round: worker w$i exited $(cat "$dir/rc.$i"):" >&2
        cat "$dir/err.$i" >&2
        exit 1
      fi
    done
    # Sorted by time, the log must read start/end pairs of one holder each,
    # with tokens going up.
    sort -n "$dir/log" | awk -v round="$round" -v n="$workers" '
      $2 == "start" {
        if (open != "") { printf "round %d: %s started while %s led\n", round, $3, open; bad = 1 }
        if ($4 + 0 <= last + 0) { printf "round %d: token %s after %s\n", round, $4, last; bad = 1 }
        open = $3; last = $4; count++; order = order " " $3 "(" $4 ")"
      }
      $2 == "end" {
        if (open != $3) { printf "round %d: %s ended while %s led\n", round, $3, open; bad = 1 }
        open = ""
      }
      END {
        if (count != n) { printf "round %d: %d of %d jobs ran\n", round, count, n; bad = 1 }
        printf "round %d:%s\n", round, order
        exit bad
      }'
    firsts+=("$(sort -n "$dir/log" | head -n1 | cut -d' ' -f3)")
  done
  local distinct
  distinct=$(printf '%s\n' "${firsts[@]}" | sort -u | wc -l)
  echo "$rounds rounds of $workers: one leader at a time, tokens going up;" \
    "$distinct distinct first winners"
  if [ "$rounds" -ge 5 ] && [ "$distinct" -lt 2 ]; then
    echo "one worker won every round: launch order decided it" >&2
    exit 1
  fi
}

split_brain() {
  export JOB_LOG=$server_dir/job.log
  touch "$JOB_LOG"
  local name=orders/leader
  # A, in its own process group, so that signal_lease_run freezes the
  # runner and its job (in a group of its own) together, as a pause of the
  # whole machine would.
  setsid "$fencepost" lease run "$name" --holder A --ttl 2s --grace 2s \
    --fence orders/1 -- "$here/../../examples/split_brain_job.sh" A 2>"$server_dir/a.err" &
  local a_pid=$!
  for _ in $(seq 1 1000); do
    grep -q '^A 20[01] ' "$JOB_LOG" && break
    sleep 0.01
  done
  if ! grep -q '^A 20[01] ' "$JOB_LOG"; then
    echo "A never wrote:" >&2
    cat "$server_dir/a.err" >&2
    exit 1
  fi
  local a_token
  a_token=$(grep -m1 '^A 20[01] ' "$JOB_LOG" | cut -d' ' -f3)
  echo "A leads with token $a_token and writes orders/1"

  signal_lease_run STOP "$a_pid"
  local frozen
  frozen=$(now_ns)
  echo "A is frozen (SIGSTOP); its 2 s lease runs out in $backend"
  # B campaigns meanwhile; its job notes when it started, writes once with
  # its token and then keeps leading.
  "$fencepost" lease run "$name" --holder B --ttl 10s --fence orders/1 -- sh -c '
      echo "$(date +%s%N)" >"$0.started"
      code=$(curl -s -o /dev/null -w "%{http_code}" -X PUT \
        -H "Fencing-Token: $FENCING_TOKEN" --data "B: shipped" \
        "$FENCEPOST_DATA/orders/1")
      echo "B $code $FENCING_TOKEN $(date +%s%N) B: shipped" >>"$JOB_LOG"
      exec sleep 60' "$server_dir/b" 2>"$server_dir/b.err" &
  local b_pid=$!
  for _ in $(seq 1 3000); do
    grep -q '^B ' "$JOB_LOG" && break
    sleep 0.01
  done
  if ! grep -q '^B 20[01] ' "$JOB_LOG"; then
    echo "B was not elected, or its write failed:" >&2
    cat "$server_dir/b.err" "$JOB_LOG" >&2
    exit 1
  fi
  local b_started b_token
  b_started=$(cat "$server_dir/b.started")
  b_token=$(grep -m1 '^B ' "$JOB_LOG" | cut -d' ' -f3)
  echo "B is elected with token $b_token and writes orders/1:" \
    "failover $(((b_started - frozen) / 1000000)) ms after A froze"
  if [ "$b_token" -le "$a_token" ]; then
    echo "B's token $b_token is not above A's $a_token" >&2
    exit 1
  fi

  local resumed
  resumed=$(now_ns)
  signal_lease_run CONT "$a_pid"
  echo "A resumes (SIGCONT), still believing it leads"
  local a_status=0
  wait "$a_pid" || a_status=$?
  echo "A's lease run exited $a_status: $(grep 'lease lost' "$server_dir/a.err" || true)"
  local after value
  after=$(awk -v t="$resumed" '$1 == "A" && $4 > t' "$JOB_LOG")
  echo "A's writes after it resumed (holder, status, token, sent, body):"
  sed 's/^/  /' <<<"$after"
  value=$(curl -s "$FENCEPOST_DATA/orders/1")
  echo "orders/1 = $value"
  kill "$b_pid" 2>/dev/null || true
  wait "$b_pid" 2>/dev/null || true

  local stale landed
  stale=$(grep -c '^A 409 ' <<<"$after" || true)
  landed=$(grep -c '^A 20[0-9] ' <<<"$after" || true)
  if [ "$value" = 'B: shipped' ] && [ "$stale" -ge 1 ] && [ "$landed" = 0 ] &&
    [ "$a_status" = 75 ]; then
    echo "the fence held: A's stale writes were refused"
    return 0
  fi
  echo "the story did not go as expected" >&2
  cat "$server_dir/a.err" >&2
  exit 1
}

case $scenario in
race) race "${3:-5}" ;;
split_brain) split_brain ;;
*) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
