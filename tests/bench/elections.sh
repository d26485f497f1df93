#!/usr/bin/env bash
# Elections side by side, in one run: fencepost's own leases, etcd,
# ZooKeeper and PostgreSQL, each a real server started here on 127.0.0.1.
# For each: elections/s and renewals/s of one candidate (tests/bench/
# elections.cc), then the failover time of the split-brain story with a 2 s
# TTL (a frozen leader's last renewal to the next leader's job starting;
# tests/coordination/scenario.sh).
#
#   tests/bench/elections.sh                      # builds build-bench first
#   BENCH_PREBUILT=build-test tests/bench/elections.sh
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
build=${BENCH_PREBUILT:-build-bench}
if [ -z "${BENCH_PREBUILT:-}" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFENCEPOST_BUILD_BENCH=ON -DFENCEPOST_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" --target fencepost elections >/dev/null
fi
secs=${BENCH_SECONDS:-5}
export FENCEPOST=$build/proxy/fencepost
. examples/lib.sh
fencepost=$FENCEPOST
start_server
# A folder other users may enter: PostgreSQL runs as its user.
coord_root=$(mktemp -d)
chmod 755 "$coord_root"
cleanup() {
  for b in etcd zookeeper postgres; do
    tests/coordination/$b.sh stop "$coord_root/$b" >/dev/null 2>&1 || true
  done
  rm -rf "$coord_root"
  stop_server
}
trap cleanup EXIT
for backend in fencepost etcd zookeeper postgres; do
  if [ "$backend" = fencepost ]; then
    url=$FENCEPOST_ADMIN
  else
    url=$(tests/coordination/$backend.sh start "$coord_root/$backend")
  fi
  "$build/tests/bench/elections" "$backend" "$url" "$secs"
  [ "$backend" = fencepost ] || tests/coordination/$backend.sh stop "$coord_root/$backend"
done
echo "== failover, 2 s TTL (split-brain story)"
for backend in fencepost etcd zookeeper postgres; do
  printf '%-10s ' "$backend"
  tests/coordination/scenario.sh "$backend" split_brain | grep -o 'failover [0-9]* ms'
done
