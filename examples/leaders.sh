#!/usr/bin/env bash
# Two C++ leaders (examples/leader, built as build/examples/leader/leader)
# campaign for one lease. One is elected and writes its progress with its
# token; the other waits. The leader is stopped with SIGTERM: it stops its
# work, releases the lease, and the other is elected at once with the next
# token and takes over the writing.
#
#   examples/leaders.sh
#
# It starts its own fencepost (with --fence-scope jobs/, so the lease
# jobs/leader fences the key jobs/progress) on ephemeral ports of 127.0.0.1.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
. "$(dirname "$0")/lib.sh"
leader=${LEADER:-}
if [ -z "$leader" ]; then
  leader=$(built leader examples/leader/leader) || exit 2
fi
start_server --fence-scope jobs/

declare -A pid
for who in one two; do
  "$leader" jobs/leader jobs/progress "$FENCEPOST_ADMIN" "$FENCEPOST_DATA" 1000 \
    >"$server_dir/$who.out" 2>&1 &
  pid[$who]=$!
done
first=""
for _ in $(seq 1 1000); do
  for who in one two; do
    grep -q '^wrote ' "$server_dir/$who.out" && first=$who
  done
  [ -n "$first" ] && break
  sleep 0.01
done
[ -n "$first" ] || { echo "nobody was elected" >&2; exit 1; }
second=$([ "$first" = one ] && echo two || echo one)
first_token=$(grep -m1 '^elected ' "$server_dir/$first.out" | cut -d' ' -f2)
echo "leader $first elected with token $first_token and writing"
sleep 0.5
if grep -q '^elected ' "$server_dir/$second.out"; then
  echo "two leaders at once" >&2
  exit 1
fi

kill -TERM "${pid[$first]}"
wait "${pid[$first]}"
echo "leader $first stopped: $(grep '^lost ' "$server_dir/$first.out")"
wait_for "$server_dir/$second.out" '^wrote '
second_token=$(grep -m1 '^elected ' "$server_dir/$second.out" | cut -d' ' -f2)
echo "leader $second elected with token $second_token and writing"
kill -TERM "${pid[$second]}"
wait "${pid[$second]}"
[ "$second_token" -gt "$first_token" ] || {
  echo "the second token is not higher" >&2
  exit 1
}
value=$(curl -s -D - "$FENCEPOST_DATA/jobs/progress" | tr -d '\r' |
  sed -n 's/^Fencing-Token: //Ip')
echo "jobs/progress was last written with token $value"
[ "$value" = "$second_token" ]
