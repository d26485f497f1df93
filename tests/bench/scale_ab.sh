#!/usr/bin/env bash
# Two fencepost binaries side by side at scale, with the bench's one load
# generator (load.cc), each server pinned to core 0 and the client to core 1
# as run.sh does. Each round gives each binary, in turn, a fresh data
# directory seeded with each number of fences (`load --seed`), then the
# fenced-put load over those keys; it prints one row per run: writes/s,
# p50, p99, p99.9, the server's CPU per request, and the bytes of LMDB's
# pages written per request (what the applier thread, fp-applier, passed to
# its write calls: /proc's wchar. Not write_bytes, which counts whole
# page-cache folios, several times more). That is the cost that grows with
# the number of fences.
#
#   tests/bench/scale_ab.sh LOAD A_BINARY B_BINARY [FENCES...]
#
# LOAD is the built tests/bench/load. FENCES defaults to "10000 1000000".
# Environment: BENCH_ROUNDS (2), BENCH_SECONDS (10), BENCH_CLIENTS (32),
# BENCH_PIN (1; 0: no pinning). Needs curl; every server listens on
# 127.0.0.1 and is stopped on exit.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
bench=$(cd "$(dirname "$0")" && pwd)
usage="usage: scale_ab.sh LOAD A_BINARY B_BINARY [FENCES...]"
load=${1:?$usage}
a=${2:?$usage}
b=${3:?$usage}
shift 3
scales=("$@")
((${#scales[@]})) || scales=(10000 1000000)
rounds=${BENCH_ROUNDS:-2}
secs=${BENCH_SECONDS:-10}
clients=${BENCH_CLIENTS:-32}
pin_server=()
pin_client=()
if ((${BENCH_PIN:-1})) && (($(nproc) >= 2)); then
  pin_server=(taskset -c 0)
  pin_client=(taskset -c 1)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-scale-ab.XXXXXX")
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# free_port, metric, lf, thread_dir
# shellcheck source=tests/bench/common.sh
source "$bench/common.sh"
written() {  # PID: the bytes the applier thread wrote
  local task
  task=$(thread_dir "$1" fp-applier)
  [[ -n $task ]] || { echo 0; return; }
  awk '$1 == "wchar:" { print $2 }' "$task/io"
}

# run LABEL BINARY FENCES: one row.
run() {
  local label=$1 binary=$2 fences=$3 port admin
  port=$(free_port)
  admin=$(free_port)
  "${pin_server[@]}" "$binary" serve --data-dir "$work/data" \
    --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
    --log-level warn 2>>"$work/log" &
  pid=$!
  for _ in $(seq 200); do
    curl -fsS -o /dev/null "http://127.0.0.1:$admin/readyz" 2>/dev/null && break
    sleep 0.05
  done
  "$load" http "127.0.0.1:$port" --seed --keys "$fences" >/dev/null
  (($(metric "$admin" fencepost_fences) >= fences)) ||
    { echo "$label: seeding left too few fences" >&2; exit 1; }
  sleep 1  # the applier catches up with the seeding
  local bytes0 out
  bytes0=$(written "$pid")
  out=$("${pin_client[@]}" "$load" http "127.0.0.1:$port" \
    --connections "$clients" --seconds "$secs" --keys "$fences" \
    --server-pid "$pid")
  local bytes=$(($(written "$pid") - bytes0))
  kill "$pid"
  wait "$pid" || { echo "$label exited with $?" >&2; exit 1; }
  pid=
  rm -rf "$work/data"
  (($(lf all_other "$out") == 0 && $(lf all_requests "$out") > 0)) ||
    { echo "$label: $out" >&2; exit 1; }
  printf '| %s | %d | %.0f | %s | %s | %s | %.1f | %.0f |\n' "$label" \
    "$fences" "$(lf rps "$out")" "$(lf p50_ms "$out")" \
    "$(lf p99_ms "$out")" "$(lf p999_ms "$out")" \
    "$(lf server_cpu_us "$out")" \
    "$((bytes / $(lf all_requests "$out")))"
}

echo "| binary | fences | writes/s | p50 ms | p99 ms | p99.9 ms | server CPU µs per request | LMDB bytes per request |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
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
