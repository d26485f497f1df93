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
free_port_range="20100 20107"

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
