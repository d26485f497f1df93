# Sourced by the server scripts of tests/coordination.

# die MESSAGE: says what failed, as "SCRIPT: MESSAGE", followed by the last
# 40 lines of $dir/server.log when there is one, and exits 1.
die() {
  echo "${0##*/}: $*" >&2
  if [[ -n ${dir:-} && -f $dir/server.log ]]; then
    echo "--- $dir/server.log (last 40 lines) ---" >&2
    tail -n 40 "$dir/server.log" >&2
  fi
  exit 1
}

# free_port: prints a port of 127.0.0.1 that nothing holds now, outside the
# kernel's ephemeral range. A port the kernel handed out (bind to port 0)
# can be taken by the next outgoing connection of any process on the machine
# before the server binds it; ports outside the range are only ever taken by
# an explicit bind. Another test may still pick the same one: a server that
# reports its address in use should be started again on another.
free_port() {
  local low high port try
  read -r low high </proc/sys/net/ipv4/ip_local_port_range
  for ((try = 0; try < 200; try++)); do
    if ((low > 11000)); then
      port=$((10000 + RANDOM % (low - 10000)))
    elif ((high < 64535)); then
      port=$((high + 1 + RANDOM % (65535 - high)))
    else
      break
    fi
    if python3 -c 'import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  echo "${0##*/}: no free port of 127.0.0.1 outside the ephemeral range $low-$high" >&2
  return 1
}

# etcd_is_ours URL PEER_PORT [CURL ARGS...]: whether the etcd at URL answers
# healthy (its cluster has a leader) and its member list names the peer
# http://127.0.0.1:PEER_PORT: the one the caller started, not one another
# test started on the port, which would answer before ours found it taken.
etcd_is_ours() {
  local url=$1 peer=$2
  shift 2
  curl -sf --max-time 1 "$@" "$url/health" 2>/dev/null | grep -q '"true"' &&
    curl -sf --max-time 1 "$@" -X POST -d '{}' "$url/v3/cluster/member/list" \
      2>/dev/null | grep -q "\"http://127.0.0.1:$peer\""
}
