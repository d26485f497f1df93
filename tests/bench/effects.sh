#!/usr/bin/env bash
# Fenced side effects: what the gate costs per call. wrk sends new calls
# (each its own Idempotency-Key) at BENCH_CLIENTS (32) connections for
# BENCH_SECONDS (10) each, to nginx answering 200 straight, then through a
# Release build of fencepost (--effect-target t=nginx) with every call under
# one fence (one call at a time, in the fence's turn: two durable commits
# and the target's round trip each), then spread over 1000 fences.
#
#   tests/bench/effects.sh            # builds build-bench first
#   BENCH_PREBUILT=build-test tests/bench/effects.sh
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
command -v wrk >/dev/null && command -v nginx >/dev/null || scripts/deps.sh
build=${BENCH_PREBUILT:-build-bench}
if [ -z "${BENCH_PREBUILT:-}" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFENCEPOST_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" --target fencepost >/dev/null
fi
clients=${BENCH_CLIENTS:-32}
secs=${BENCH_SECONDS:-10}
# shellcheck source=tests/bench/common.sh
. tests/bench/common.sh
. examples/lib.sh
FENCEPOST=$build/proxy/fencepost
fencepost=$FENCEPOST

work=$(mktemp -d)
port=$(free_port)
cat >"$work/nginx.conf" <<CONF
daemon off;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work;
  server {
    listen 127.0.0.1:$port;
    location / { return 200 '{"id":"ch_1","status":"succeeded"}'; }
  }
}
CONF
nginx -c "$work/nginx.conf" -p "$work" &
nginx_pid=$!
trap 'kill $nginx_pid 2>/dev/null || true; stop_server; rm -rf "$work"' EXIT
for _ in $(seq 1 500); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.01
done
start_server --effect-target "t=http://127.0.0.1:$port"
trap 'kill $nginx_pid 2>/dev/null || true; stop_server; rm -rf "$work"' EXIT
data=${FENCEPOST_DATA#http://}

run() {  # NAME URL PATH FENCES
  echo "== $1, $clients clients, ${secs}s"
  BENCH_EFFECT_PATH=$3 BENCH_EFFECT_FENCES=$4 wrk -t2 -c"$clients" \
    -d"${secs}s" --latency -s tests/bench/effect.lua "$2" |
    grep -E 'Requests/sec|^ +(50|99)%|non-2xx'
}
run "straight to nginx" "http://127.0.0.1:$port" /charges 1
run "through fencepost, one fence" "http://$data" /v1/effects/t/charges 1
run "through fencepost, 1000 fences" "http://$data" /v1/effects/t/charges 1000
curl -s "$FENCEPOST_ADMIN/metrics" | grep -E '^fencepost_effects_total\{outcome="(sent|unknown|not_sent)"'
