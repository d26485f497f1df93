#!/usr/bin/env bash
# Lease throughput and latency: renewals and grants at BENCH_CLIENTS (32)
# connections for BENCH_SECONDS (10) each, against a Release build of
# fencepost on 127.0.0.1 with a fresh data directory.
#
#   tests/bench/leases.sh            # builds build-bench first
#   BENCH_PREBUILT=build-test tests/bench/leases.sh
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
command -v wrk >/dev/null || scripts/deps.sh
build=${BENCH_PREBUILT:-build-bench}
if [ -z "${BENCH_PREBUILT:-}" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFENCEPOST_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" --target fencepost >/dev/null
fi
clients=${BENCH_CLIENTS:-32}
secs=${BENCH_SECONDS:-10}
. examples/lib.sh
FENCEPOST=$build/proxy/fencepost
fencepost=$FENCEPOST
start_server
admin=${FENCEPOST_ADMIN#http://}

for mode in renew grant; do
  echo "== $mode, $clients clients, ${secs}s"
  BENCH_LEASE_MODE=$mode wrk -t2 -c"$clients" -d"${secs}s" --latency \
    -s tests/bench/lease.lua "http://$admin" |
    grep -E 'Requests/sec|^ +(50|90|99)%|non-200|Latency '
done
curl -s "$FENCEPOST_ADMIN/metrics" | grep -E '^fencepost_lease_(grants|renewals)_total'
