#!/usr/bin/env bash
# What guarding a bucket costs: PutObject straight to a real Ceph RGW
# (signed by the client, tests/bench/s3_put.cc) against the same clients'
# fenced PUTs through fencepost's s3:// backend to the same RGW, in one run:
# BENCH_CLIENTS clients (32), one keep-alive connection each, 4 KiB objects,
# each client over keys of its own. The two phases alternate for
# BENCH_S3_ROUNDS rounds, so a neighbour's load hits both alike; each round
# prints the ratio fenced ÷ direct. Then, unless BENCH_PERF=0, one more
# fenced phase under `perf record -g` on fencepost, and its top symbols.
#
#   tests/bench/s3.sh            # about 90 s (the cluster starts in ~15 s)
#   tests/bench/s3.sh --smoke    # 2 s per phase, no perf; checks only that
#                                # the counts add up
#
# Environment: BENCH_SECONDS (10; smoke 2), BENCH_CLIENTS (32),
# BENCH_S3_SIZE (4096), BENCH_S3_KEYS (64 per client), BENCH_S3_ROUNDS (2),
# BENCH_PERF (1), BENCH_PREBUILT=DIR uses the binaries of an existing build
# (configured with FENCEPOST_BUILD_BENCH=ON) instead of building Release.
#
# The cluster (tests/coordination/rgw.sh: one monitor, one memstore OSD, one
# radosgw, all on 127.0.0.1) and fencepost run in a temp directory and are
# stopped on exit. Checks, never timings: no request failed, fencepost
# accepted exactly the fenced PUTs its clients saw answered 2xx, the objects
# hold the bytes and (fenced) the token, a stale token is refused. Exit
# status 1 when a check fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BENCH=$ROOT/tests/bench
# free_port, metric
# shellcheck source=tests/bench/common.sh
source "$BENCH/common.sh"

SMOKE=0
[[ ${1:-} == --smoke ]] && SMOKE=1
SECS=${BENCH_SECONDS:-10}
CLIENTS=${BENCH_CLIENTS:-32}
SIZE=${BENCH_S3_SIZE:-4096}
KEYS=${BENCH_S3_KEYS:-64}
ROUNDS=${BENCH_S3_ROUNDS:-2}
PERF=${BENCH_PERF:-1}
WARMUP=1
if ((SMOKE)); then
  SECS=${BENCH_SECONDS:-2}
  ROUNDS=1
  PERF=0
  WARMUP=0.5
fi
TOKEN=2  # every fenced PUT's; the stale check sends 1

log() { printf '== %s\n' "$*" >&2; }

# --- set-up -----------------------------------------------------------------
BUILD=${FENCEPOST_BENCH_BUILD_DIR:-build-bench}
if [[ -n ${BENCH_PREBUILT:-} ]]; then
  BUILD=$BENCH_PREBUILT
else
  scripts/deps.sh
  log "building Release in $BUILD"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFENCEPOST_BUILD_TESTS=OFF -DFENCEPOST_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" --target fencepost s3_put >/dev/null
fi
BUILD=$(cd "$BUILD" && pwd)
FENCEPOST=$BUILD/proxy/fencepost
S3_PUT=$BUILD/tests/bench/s3_put
[[ -x $S3_PUT ]] || { echo "no $S3_PUT (FENCEPOST_BUILD_BENCH=ON?)" >&2; exit 1; }
if ((PERF)) && ! command -v perf >/dev/null; then
  log "perf not found: no profile"
  PERF=0
fi

WORK=$(mktemp -d /tmp/fencepost-s3bench.XXXXXX)
FP_PID=""
cleanup() {
  if [[ -n $FP_PID ]]; then
    kill "$FP_PID" 2>/dev/null || true
    wait "$FP_PID" 2>/dev/null || true
  fi
  tests/coordination/rgw.sh stop "$WORK/rgw" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

FAILED=0
fail() { echo "FAIL: $*" >&2; FAILED=1; }
ROWS=$WORK/rows.tsv
: >"$ROWS"

log "starting Ceph RGW"
# With $$ as owner: the cluster goes away even if this script is killed.
tests/coordination/rgw.sh start "$WORK/rgw" $$ >/dev/null
set -a
# shellcheck disable=SC1091
. "$WORK/rgw/env"
set +a
RGW_PID=$(<"$WORK/rgw/run/rgw.daemon")
OSD_PID=$(<"$WORK/rgw/run/osd.daemon")

wait_for() {  # command... : retries for up to 10 s
  for _ in $(seq 200); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
  return 1
}

start_fencepost() {
  local attempt
  for attempt in 1 2 3 4 5; do  # another program may take a port meanwhile
    FP_PORT=$(free_port)
    FP_ADMIN=$(free_port)
    "$FENCEPOST" serve --data-dir "$WORK/fp" --listen "127.0.0.1:$FP_PORT" \
      --admin-listen "127.0.0.1:$FP_ADMIN" --log-level warn \
      --backend "s3://$S3_BUCKET" --s3-endpoint "$S3_ENDPOINT" \
      --s3-region "$S3_REGION" >>"$WORK/fencepost.log" 2>&1 &
    FP_PID=$!
    if wait_for curl -fsS "http://127.0.0.1:$FP_ADMIN/readyz"; then return; fi
    kill "$FP_PID" 2>/dev/null || true
    wait "$FP_PID" 2>/dev/null || true
  done
  cat "$WORK/fencepost.log" >&2
  echo "FAIL: fencepost did not start" >&2
  exit 1
}
log "starting fencepost (s3://$S3_BUCKET)"
start_fencepost

# cpu_ticks PID: the process's user plus system time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# cpu_us TICKS REQUESTS: CPU microseconds per request.
cpu_us() { echo $(($1 * 1000000 / $(getconf CLK_TCK) / ($2 > 0 ? $2 : 1))); }
# field NAME LINE: the value of NAME=value in s3_put's line.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# load MODE [extra s3_put args]: one s3_put run, its line on stdout.
load() {
  local mode=$1 target
  shift
  if [[ $mode == direct ]]; then
    target=("$S3_ENDPOINT" "$S3_BUCKET" --region "$S3_REGION" --token "$TOKEN")
  else
    target=("http://127.0.0.1:$FP_PORT" --token "$TOKEN")
  fi
  timeout $((SECS * 3 + 60)) "$S3_PUT" "$mode" "${target[@]}" \
    --prefix "$mode" --clients "$CLIENTS" --seconds "$SECS" \
    --warmup "$WARMUP" --size "$SIZE" --keys "$KEYS" "$@"
}

# phase MODE ROUND: runs the load, checks its counts, appends a row:
# ROUND MODE OPS P50 P99 MAX OK FAILED CPU_FP CPU_RGW CPU_OSD CPU_CLIENT
phase() {
  local mode=$1 round=$2 out
  local fp0 rgw0 osd0 acc0
  fp0=$(cpu_ticks "$FP_PID")
  rgw0=$(cpu_ticks "$RGW_PID")
  osd0=$(cpu_ticks "$OSD_PID")
  acc0=$(metric "$FP_ADMIN" fencepost_writes_accepted_total)
  out=$(load "$mode") || { fail "$mode round $round: s3_put exited with $?"; return; }
  local fp rgw osd acc all_ok all_failed requests
  fp=$(($(cpu_ticks "$FP_PID") - fp0))
  rgw=$(($(cpu_ticks "$RGW_PID") - rgw0))
  osd=$(($(cpu_ticks "$OSD_PID") - osd0))
  acc=$(($(metric "$FP_ADMIN" fencepost_writes_accepted_total) - acc0))
  all_ok=$(field all_ok "$out")
  all_failed=$(field all_failed "$out")
  requests=$((all_ok + all_failed))
  ((all_failed == 0)) || fail "$mode round $round: $all_failed requests failed"
  (($(field ok "$out") > 0)) || fail "$mode round $round: no request succeeded"
  if [[ $mode == fenced ]]; then
    ((acc == all_ok)) ||
      fail "fenced round $round: fencepost accepted $acc, its clients saw $all_ok"
  else
    ((acc == 0)) || fail "direct round $round: fencepost accepted $acc writes"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$mode" \
    "$(field ops_per_s "$out")" "$(field p50_ms "$out")" \
    "$(field p99_ms "$out")" "$(field max_ms "$out")" "$(field ok "$out")" \
    "$(field failed "$out")" \
    "$(if [[ $mode == fenced ]]; then cpu_us "$fp" "$requests"; else echo -; fi)" \
    "$(cpu_us "$rgw" "$requests")" "$(cpu_us "$osd" "$requests")" \
    "$(field client_cpu_us_per_req "$out")" >>"$ROWS"
}

for round in $(seq "$ROUNDS"); do
  log "round $round: PutObject straight to RGW"
  phase direct "$round"
  log "round $round: fenced PUTs through fencepost"
  phase fenced "$round"
done

# --- the checks on the bucket -------------------------------------------------
s3_object() { timeout 60 python3 tests/coordination/s3_object.py "$@"; }
json_field() {  # NAME JSON: a top-level number or string
  python3 -c 'import json, sys; v = json.loads(sys.argv[2]); print(v.get(sys.argv[1]) if sys.argv[1] != "token" else v.get("metadata", {}).get("fencing-token"))' "$1" "$2"
}
check_object() {  # KEY WANT_TOKEN ("" for none)
  local out
  out=$(s3_object head "$1") || { fail "HeadObject $1: $out"; return; }
  [[ $(json_field status "$out") == 200 ]] || { fail "HeadObject $1: $out"; return; }
  [[ $(json_field content_length "$out") == "$SIZE" ]] ||
    fail "$1 holds $(json_field content_length "$out") bytes, not $SIZE"
  [[ $(json_field token "$out") == "${2:-$TOKEN}" ]] ||
    fail "$1's fencing-token metadata is '$(json_field token "$out")', not ${2:-$TOKEN}"
}
log "checking the objects"
check_object direct/c0/k0 "$TOKEN"  # s3_put sends the same metadata direct
check_object fenced/c0/k0 "$TOKEN"
stale=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Fencing-Token: 1' \
  --data-binary stale "http://127.0.0.1:$FP_PORT/fenced/c0/k0")
[[ $stale == 409 ]] || fail "a stale PUT (token 1 < $TOKEN) answered $stale, not 409"

# --- the profile ------------------------------------------------------------
PERF_OUT=$WORK/perf.txt
if ((PERF)); then
  log "fenced PUTs again, fencepost under perf record -g"
  perf record -g -F 999 -p "$FP_PID" -o "$WORK/perf.data" -- \
    sleep "$(awk -v s="$SECS" -v w="$WARMUP" 'BEGIN { print s + w }')" \
    >"$WORK/perf.log" 2>&1 &
  perf_pid=$!
  if out=$(load fenced); then
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t-\t-\t-\t%s\n' perf "fenced, under perf" \
      "$(field ops_per_s "$out")" "$(field p50_ms "$out")" \
      "$(field p99_ms "$out")" "$(field max_ms "$out")" "$(field ok "$out")" \
      "$(field failed "$out")" "$(field client_cpu_us_per_req "$out")" >>"$ROWS"
  fi
  if wait "$perf_pid"; then
    {
      echo "fencepost's top symbols (self time, perf record -g -F 999):"
      echo
      perf report -i "$WORK/perf.data" --no-children --sort symbol -g none \
        --stdio --percent-limit 1.5 2>/dev/null | grep '%' | head -20
      echo
      echo "by library:"
      echo
      perf report -i "$WORK/perf.data" --no-children --sort dso -g none \
        --stdio --percent-limit 1 2>/dev/null | grep '%' | head -10
    } >"$PERF_OUT"
  else
    echo "perf record failed (not permitted here?): $(tail -3 "$WORK/perf.log")" >"$PERF_OUT"
  fi
fi

# --- the table --------------------------------------------------------------
echo
echo "fencepost s3:// benchmark, $(date -u +%Y-%m-%d), $(nproc) cores, $(uname -r)," \
  "Ceph RGW $(radosgw --version 2>/dev/null | awk '{ print $3 }') (memstore OSD)," \
  "$CLIENTS clients, $SIZE-byte objects, ${SECS}s per phase after ${WARMUP}s" \
  "of warm-up, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo
echo "| round | path | req/s | p50 ms | p99 ms | max ms | ok | failed | CPU µs per request: fencepost / radosgw / ceph-osd / client |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
awk -F'\t' '{
  path = $2
  if ($2 == "direct") path = "PutObject straight to RGW (signed)"
  if ($2 == "fenced") path = "fenced PUT through fencepost"
  printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s / %s |\n",
    $1, path, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' "$ROWS"
echo
awk -F'\t' '
  $2 == "direct" { d[$1] = $3; dp[$1] = $5 }
  $2 == "fenced" { f[$1] = $3; fp[$1] = $5 }
  END {
    for (r in d) if (r in f && d[r] > 0) {
      ratio = f[r] / d[r]; extra = fp[r] - dp[r]
      printf "round %s: fenced ÷ direct throughput %.2f×, p99 %+.2f ms (goal: ≥ 0.90×, ≤ +1 ms: %s)\n",
        r, ratio, extra, (ratio >= 0.9 && extra <= 1) ? "met" : "not met"
    }
  }' "$ROWS" | sort
if [[ -s $PERF_OUT ]]; then
  echo
  cat "$PERF_OUT"
fi
((FAILED == 0)) || { echo "FAILED: see the messages above" >&2; exit 1; }
