#!/usr/bin/env bash
# Starts and stops a real single-member etcd (Debian's etcd-server) on free
# ports of 127.0.0.1, for the tests.
#   tests/coordination/etcd.sh start DIR   # prints etcd://127.0.0.1:PORT
#   tests/coordination/etcd.sh stop DIR
# Heartbeats of 50 ms and an election timeout of 500 ms let leases as short
# as 1 s be granted (etcd's least TTL is 1.5 election timeouts).
# With ETCD_TLS_DIR set (holding ca.pem, server.pem, server.key, client.pem,
# client.key), the client port is TLS and asks for client certificates from
# that CA; it prints etcds://127.0.0.1:PORT then.
set -euo pipefail
action=${1:?start or stop}
dir=${2:?a directory}

. "$(dirname "$0")/lib.sh"

# Runs one etcd on two fresh ports; returns 0 once it is healthy and has
# printed its URL, 1 when a port turned out to be taken, exits otherwise.
try_start() {
  local client peer pid
  client=$(free_port) || exit 1
  peer=$(free_port) || exit 1
  rm -rf "$dir/data"
  etcd --name member --data-dir "$dir/data" \
    --listen-client-urls "$scheme://127.0.0.1:$client" \
    --advertise-client-urls "$scheme://127.0.0.1:$client" "${tls[@]}" \
    --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "member=http://127.0.0.1:$peer" \
    --heartbeat-interval 50 --election-timeout 500 \
    --log-level error >"$dir/etcd.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/pid"
  for _ in $(seq 1 200); do
    if etcd_is_ours "$scheme://127.0.0.1:$client" "$peer" "${curl_tls[@]}"; then
      echo "$url://127.0.0.1:$client"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      rm -f "$dir/pid"
      grep -q 'address already in use' "$dir/etcd.log" && return 1
      break
    fi
    sleep 0.05
  done
  echo "etcd did not start:" >&2
  cat "$dir/etcd.log" >&2
  exit 1
}

case $action in
start)
  mkdir -p "$dir"
  scheme=http url=etcd tls=() curl_tls=()
  if [ -n "${ETCD_TLS_DIR:-}" ]; then
    scheme=https url=etcds
    tls=(--cert-file "$ETCD_TLS_DIR/server.pem" --key-file "$ETCD_TLS_DIR/server.key"
      --trusted-ca-file "$ETCD_TLS_DIR/ca.pem" --client-cert-auth)
    curl_tls=(--cacert "$ETCD_TLS_DIR/ca.pem" --cert "$ETCD_TLS_DIR/client.pem"
      --key "$ETCD_TLS_DIR/client.key")
  fi
  for _ in 1 2 3 4 5; do
    try_start && exit 0
  done
  echo "etcd did not start: its ports were taken five times" >&2
  exit 1
  ;;
stop)
  if [ -f "$dir/pid" ]; then
    pid=$(cat "$dir/pid")
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
