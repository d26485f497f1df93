#!/usr/bin/env bash
# Starts and stops a real 3-member etcd cluster (Debian's etcd-server) on
# free ports of 127.0.0.1, and single members of it, for the tests.
#   etcd_cluster.sh start DIR        # prints 127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#   etcd_cluster.sh stop-member DIR I [kill]   # I in 1..3; SIGKILL with "kill"
#   etcd_cluster.sh start-member DIR I         # again, with its data
#   etcd_cluster.sh stop DIR
# Heartbeats of 50 ms and an election timeout of 500 ms keep failover
# within about a second.
set -euo pipefail
action=${1:?start, stop, stop-member or start-member}
dir=${2:?a directory}

. "$(dirname "$0")/lib.sh"

launch() {
  local i=$1 state=$2
  local client peer
  client=$(cat "$dir/client-$i")
  peer=$(cat "$dir/peer-$i")
  etcd --name "m$i" --data-dir "$dir/data-$i" \
    --listen-client-urls "http://127.0.0.1:$client" \
    --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$(cat "$dir/cluster")" \
    --initial-cluster-state "$state" \
    --initial-cluster-token fencepost-test \
    --heartbeat-interval 50 --election-timeout 500 \
    --log-level error >>"$dir/etcd-$i.log" 2>&1 &
  echo $! >"$dir/pid-$i"
}

stop_member() {
  local i=$1 signal=${2:-TERM}
  [ -f "$dir/pid-$i" ] || return 0
  local pid
  pid=$(cat "$dir/pid-$i")
  kill -CONT "$pid" 2>/dev/null || true
  kill "-$signal" "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/pid-$i"
}

# Whether member $1 answers as a member of this cluster.
member_ready() {
  etcd_is_ours "http://127.0.0.1:$(cat "$dir/client-$1")" "$(cat "$dir/peer-1")"
}

# Waits until all three members run and are ready; returns 1 at once when
# one has exited, or after 10 s.
wait_healthy() {
  local i
  for _ in $(seq 1 200); do
    for i in 1 2 3; do
      kill -0 "$(cat "$dir/pid-$i")" 2>/dev/null || return 1
    done
    member_ready 1 && member_ready 2 && member_ready 3 && return 0
    sleep 0.05
  done
  return 1
}

case $action in
start)
  mkdir -p "$dir"
  for _ in 1 2 3 4 5; do
    cluster=
    for i in 1 2 3; do
      free_port >"$dir/client-$i"
      free_port >"$dir/peer-$i"
      cluster+="${cluster:+,}m$i=http://127.0.0.1:$(cat "$dir/peer-$i")"
    done
    echo "$cluster" >"$dir/cluster"
    rm -rf "$dir"/data-* "$dir"/etcd-*.log
    for i in 1 2 3; do launch "$i" new; done
    endpoints=
    for i in 1 2 3; do endpoints+="${endpoints:+,}127.0.0.1:$(cat "$dir/client-$i")"; done
    if wait_healthy; then
      echo "$endpoints"
      exit 0
    fi
    # A port taken between its choice and etcd's bind (lib.sh's claims
    # keep the tests' own choices apart; another program may still bind
    # it): again, on new ones.
    for i in 1 2 3; do stop_member "$i"; done
    grep -qE 'address already in use|duplicate url' "$dir"/etcd-*.log || break
  done
  echo "the etcd cluster did not start:" >&2
  cat "$dir"/etcd-*.log >&2
  exit 1
  ;;
stop-member)
  i=${3:?member 1, 2 or 3}
  if [ "${4:-}" = kill ]; then stop_member "$i" KILL; else stop_member "$i"; fi
  ;;
start-member)
  i=${3:?member 1, 2 or 3}
  launch "$i" existing
  ;;
stop)
  for i in 1 2 3; do stop_member "$i"; done
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start|stop|stop-member|start-member DIR [I]" >&2
  exit 2
  ;;
esac
