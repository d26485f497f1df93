#!/usr/bin/env bash
# lib.sh's free_port never hands out one port twice while it is claimed:
# not within one cluster's six ports (etcd_cluster.sh), nor to two tests
# choosing at once. Run over a range of 8 ports, where random choices
# without the claims repeat a port almost every time.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
free_port_claims=$(mktemp -d)
trap 'rm -rf "$free_port_claims"' EXIT
export free_port_claims
# Eight ports in a row that nothing holds now (other tests run beside this
# one and may hold some of any fixed range).
first=""
for ((base = 20100; base < 30000; base += 8)); do
  if python3 -c 'import socket, sys
for p in range(int(sys.argv[1]), int(sys.argv[1]) + 8):
    socket.socket().bind(("127.0.0.1", p))' "$base" 2>/dev/null; then
    first=$base
    break
  fi
done
[ -n "$first" ] || { echo "no eight free ports in a row" >&2; exit 1; }
free_port_range="$first $((first + 7))"

# One cluster: three client and three peer ports.
ports=()
for _ in 1 2 3 4 5 6; do ports+=("$(free_port)"); done
repeated=$(printf '%s\n' "${ports[@]}" | sort | uniq -d)
[ -z "$repeated" ] || { echo "one cluster got port(s) twice: $repeated (${ports[*]})" >&2; exit 1; }
# All eight again (claims dropped), four to two tests at once, four after.
rm -rf "${free_port_claims:?}"/*
(free_port >"$free_port_claims.a"; free_port >>"$free_port_claims.a") &
(free_port >"$free_port_claims.b"; free_port >>"$free_port_claims.b") &
wait
for _ in 1 2 3 4; do free_port >>"$free_port_claims.c"; done
trap 'rm -rf "$free_port_claims" "$free_port_claims".?' EXIT
repeated=$(sort "$free_port_claims".? | uniq -d)
[ -z "$repeated" ] || { echo "tests at once got port(s) twice: $repeated" >&2; exit 1; }
echo "free_port handed out 8 distinct ports of 8, twice"
