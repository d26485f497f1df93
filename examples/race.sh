#!/usr/bin/env bash
# The 8-process race: eight separate `fencepost lease acquire` processes are
# released at once (each after its own random jitter) against one lease.
# Exactly one wins; the seven others are told who holds it. The winner then
# releases, and the next round starts. Repeated ROUNDS times (default 20).
#
#   examples/race.sh [ROUNDS]
#
# Exits 1 when a round does not have exactly one winner, or a loser was not
# told the winner's name.
#
# It starts its own fencepost on ephemeral ports of 127.0.0.1.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
. "$(dirname "$0")/lib.sh"
start_server
rounds=${1:-20}
workers=8
work=$server_dir

winners=()
for round in $(seq 1 "$rounds"); do
  dir=$work/$round
  mkdir "$dir"
  pids=()
  for i in $(seq 1 "$workers"); do
    (
      while [ ! -e "$dir/go" ]; do sleep 0.002; done
      sleep "$(printf '0.%03d' $((RANDOM % 40)))"
      rc=0
      "$fencepost" lease acquire demo/race --holder "worker-$i" --ttl 30s \
        >"$dir/out.$i" 2>"$dir/err.$i" || rc=$?
      echo "$rc" >"$dir/rc.$i"
    ) &
    pids+=($!)
  done
  sleep 0.05 # every worker is waiting
  touch "$dir/go"
  wait "${pids[@]}"

  winner="" token=""
  for i in $(seq 1 "$workers"); do
    if [ "$(cat "$dir/rc.$i")" = 0 ]; then
      if [ -n "$winner" ]; then
        echo "round $round: two winners: $winner and worker-$i" >&2
        exit 1
      fi
      winner=worker-$i
      token=$(grep -o '"token":[0-9]*' "$dir/out.$i" | cut -d: -f2)
    fi
  done
  if [ -z "$winner" ]; then
    echo "round $round: nobody won" >&2
    exit 1
  fi
  told=0
  for i in $(seq 1 "$workers"); do
    [ "worker-$i" = "$winner" ] && continue
    if [ "$(cat "$dir/rc.$i")" != 1 ] ||
      ! grep -q "\"holder\":\"$winner\"" "$dir/out.$i"; then
      echo "round $round: worker-$i was not told that $winner holds it:" >&2
      cat "$dir/out.$i" "$dir/err.$i" >&2
      exit 1
    fi
    told=$((told + 1))
  done
  echo "round $round: $winner won with token $token; $told others were told"
  winners+=("$winner")
  "$fencepost" lease release demo/race --holder "$winner" --token "$token"
done
distinct=$(printf '%s\n' "${winners[@]}" | sort -u | wc -l)
echo "$rounds rounds, $distinct distinct winners"
if [ "$rounds" -ge 5 ] && [ "$distinct" -lt 2 ]; then
  echo "one worker won every round: launch order decided it" >&2
  exit 1
fi
