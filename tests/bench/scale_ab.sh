#!/usr/bin/env bash
# Two fencepost binaries side by side at scale. Each round gives each binary,
# in turn, a fresh data directory seeded with each number of fences
# (seed_put.lua, as run.sh seeds), then fenced_put.lua's load over those
# keys; it prints one row per run: writes/s, p99, the server's CPU per
# request, and the bytes of LMDB's pages written per request (what the
# applier thread, fp-applier, passed to its write calls: /proc's wchar. Not
# write_bytes, which counts whole page-cache folios, several times more).
# That is the cost that grows with the number of fences.
#
#   tests/bench/scale_ab.sh A_BINARY B_BINARY [FENCES...]
#
# FENCES defaults to "10000 1000000". Environment: BENCH_ROUNDS (2),
# BENCH_SECONDS (10), BENCH_CLIENTS (32). Needs wrk and curl; every server
# listens on 127.0.0.1 and is stopped on exit.
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
a=${1:?usage: scale_ab.sh A_BINARY B_BINARY [FENCES...]}
b=${2:?usage: scale_ab.sh A_BINARY B_BINARY [FENCES...]}
shift 2
scales=("$@")
((${#scales[@]})) || scales=(10000 1000000)
rounds=${BENCH_ROUNDS:-2}
secs=${BENCH_SECONDS:-10}
clients=${BENCH_CLIENTS:-32}
command -v wrk >/dev/null || { echo "wrk is required" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-scale-ab.XXXXXX")
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# free_port, metric
# shellcheck source=tests/bench/common.sh
source "$bench/common.sh"
written() {  # PID: the bytes the applier thread wrote
  local task
  for task in "/proc/$1/task"/*; do
    [[ $(cat "$task/comm") == fp-applier ]] || continue
    awk '$1 == "wchar:" { print $2 }' "$task/io"
    return
  done
  echo 0
}
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# run LABEL BINARY FENCES: one row.
run() {
  local label=$1 binary=$2 fences=$3 port admin
  port=$(free_port)
  admin=$(free_port)
  "$binary" serve --data-dir "$work/data" --listen "127.0.0.1:$port" \
    --admin-listen "127.0.0.1:$admin" --log-level warn 2>>"$work/log" &
  pid=$!
  for _ in $(seq 200); do
    curl -fsS -o /dev/null "http://127.0.0.1:$admin/readyz" 2>/dev/null && break
    sleep 0.05
  done
  BENCH_KEYS=$fences BENCH_THREADS=2 wrk -t2 -c64 -d600s \
    -s "$bench/seed_put.lua" "http://127.0.0.1:$port" >/dev/null &
  local seeder=$!
  while (($(metric "$admin" fencepost_fences) < fences)); do sleep 0.2; done
  kill -INT "$seeder"
  wait "$seeder" 2>/dev/null || true
  sleep 1  # the applier catches up with the seeding
  local bytes0 ticks0
  bytes0=$(written "$pid")
  ticks0=$(ticks "$pid")
  BENCH_KEYS=$fences wrk -t2 -c"$clients" -d"${secs}s" --latency \
    -s "$bench/fenced_put.lua" "http://127.0.0.1:$port" >"$work/wrk.out"
  local bytes=$(($(written "$pid") - bytes0)) cpu=$(($(ticks "$pid") - ticks0))
  kill "$pid"
  wait "$pid" || { echo "$label exited with $?" >&2; exit 1; }
  pid=
  rm -rf "$work/data"
  awk -v label="$label" -v fences="$fences" -v bytes="$bytes" -v cpu="$cpu" \
    -v tck="$(getconf CLK_TCK)" '
    function ms(v) {
      if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
      if (v ~ /s$/) return v * 1000; return v }
    /requests in/ { requests = $1 }
    /Requests\/sec:/ { ops = $2 }
    $1 == "99.000%" || $1 == "99%" { p99 = ms($2) }
    END {
      printf "| %s | %d | %.0f | %.2f | %.0f | %.0f |\n", label, fences, ops,
        p99, cpu * 1e6 / tck / requests, bytes / requests }' "$work/wrk.out"
}

echo "| binary | fences | writes/s | p99 ms | CPU µs per request | LMDB bytes per request |"
echo "| --- | --- | --- | --- | --- | --- |"
for round in $(seq "$rounds"); do
  for fences in "${scales[@]}"; do
    # Alternate which binary goes first.
    if ((round % 2)); then
      run A "$a" "$fences"; run B "$b" "$fences"
    else
      run B "$b" "$fences"; run A "$a" "$fences"
    fi
  done
done
