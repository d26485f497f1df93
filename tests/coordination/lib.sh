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
# kernel's ephemeral range, and that no other test of this machine was handed
# in the last 10 minutes. A port the kernel handed out (bind to port 0) can
# be taken by the next outgoing connection of any process on the machine
# before the server binds it; ports outside the range are only ever taken by
# an explicit bind. Each port handed out is claimed (a directory under
# $free_port_claims, made atomically; tests/testing's FreePort claims the
# same way), so two calls, of one cluster or of two tests at once, never get
# the same port while the server it was meant for binds it. A server that
# still reports its address in use should be started again on another.
# $free_port_range ("LOW HIGH") overrides the range (the harness's test).
free_port_claims=${free_port_claims:-${TMPDIR:-/tmp}/fencepost-ports}
free_port() {
  local low high first last port try
  read -r low high </proc/sys/net/ipv4/ip_local_port_range
  if [[ -n ${free_port_range:-} ]]; then
    read -r first last <<<"$free_port_range"
  elif ((low > 11000)); then
    first=10000 last=$((low - 1))
  elif ((high < 64535)); then
    first=$((high + 1)) last=65535
  else
    echo "${0##*/}: no ports of 127.0.0.1 outside the ephemeral range $low-$high" >&2
    return 1
  fi
  mkdir -p "$free_port_claims"
  # A claim older than this (10 minutes) is free again.
  touch -d '-10 min' "$free_port_claims/.expired"
  for ((try = 0; try < 200; try++)); do
    port=$((first + (RANDOM * 32768 + RANDOM) % (last - first + 1)))
    if ! mkdir "$free_port_claims/$port" 2>/dev/null; then
      [[ $free_port_claims/$port -ot $free_port_claims/.expired ]] || continue
      rmdir "$free_port_claims/$port" 2>/dev/null || true
      mkdir "$free_port_claims/$port" 2>/dev/null || continue
    fi
    if python3 -c 'import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  echo "${0##*/}: no free port of 127.0.0.1 in $first-$last after 200 tries" >&2
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
