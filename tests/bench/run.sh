#!/usr/bin/env bash
# The side-by-side benchmark: durable fenced writes through fencepost and
# through what a team would pick instead (Redis with AOF fsync always,
# PostgreSQL with synchronous commit, etcd), with the same workload: 128-byte
# values over BENCH_KEYS keys, one writer in ten a stale leader. Also the
# ceilings (a null Beast HTTP server with the same client, raw LMDB), a
# single client, one hot fence, scale runs and restart-to-ready (after a
# clean stop and after SIGKILL under load).
#
#   tests/bench/run.sh            # everything (about 10 minutes)
#   tests/bench/run.sh --smoke    # fencepost and the ceilings, a few seconds
#                                 # each; checks only that the counts add up
#
# Environment: BENCH_SECONDS (10), BENCH_CLIENTS (32), BENCH_KEYS (10000),
# BENCH_SCALE ("10000 100000 1000000"; empty skips), BENCH_PEERS=0 skips the
# peers, BENCH_MICRO=0 skips the Google Benchmark programs, BENCH_ROUNDS (3)
# A/B rounds against Redis at each of BENCH_AB_CLIENTS ("32 128"), BENCH_PREBUILT=DIR
# uses the binaries of an existing build (the test command's) instead of
# building Release. Then tests/bench/s3.sh (fenced PUTs through fencepost to
# a Ceph RGW against PutObject straight to it; its own table, --smoke in
# smoke mode, about 20 s there); BENCH_S3=0 skips it.
#
# One load generator drives fencepost, the null server and Redis
# (tests/bench/load.cc: one thread, closed loop, HTTP/1.1 or RESP, the same
# keys and stale writers, latencies in a log-linear histogram, each side's
# CPU per request); with 2 cores or more, each server is pinned to core 0
# and the client to core 1 (BENCH_PIN=0: not pinned). PostgreSQL keeps
# pgbench and etcd wrk with a Lua script: their protocols are not HTTP/1.1
# PUTs or RESP.
#
# Every fencepost and Redis run also counts what the block device holding
# its data wrote (/sys/class/block/DEV/stat: sectors and write IOs, from
# before the load until the server stopped), per request: the A/B table
# shows both side by side, the scale lines fencepost's. The device is
# shared, so another process's writes count too; on tmpfs there is none.
#
# Installs what it needs from Debian, starts every server on 127.0.0.1 in a
# temp directory, stops them all on exit, and prints one table. Every run
# checks afterwards that no stale write landed. Exit status 1 when one did,
# or when the counts do not add up.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
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
KEYS=${BENCH_KEYS:-10000}
SCALE=${BENCH_SCALE-10000 100000 1000000}
PEERS=${BENCH_PEERS:-1}
MICRO=${BENCH_MICRO:-1}
ROUNDS=${BENCH_ROUNDS:-3}
AB_CLIENTS=${BENCH_AB_CLIENTS:-32 128}
BUILD=${FENCEPOST_BENCH_BUILD_DIR:-build-bench}
if ((SMOKE)); then
  SECS=${BENCH_SECONDS:-2}
  KEYS=${BENCH_KEYS:-1000}
  SCALE=""
  PEERS=0
  MICRO=0
fi

log() { printf '== %s\n' "$*" >&2; }

# --- set-up -----------------------------------------------------------------
if [[ -n ${BENCH_PREBUILT:-} ]]; then
  # The test command's own build (configured with FENCEPOST_BUILD_BENCH=ON).
  BUILD=$BENCH_PREBUILT
  MICRO=0
else
  scripts/deps.sh
fi
need=()
command -v wrk >/dev/null || need+=(wrk)
if ((PEERS)); then
  command -v redis-server >/dev/null || need+=(redis-server)
  command -v pgbench >/dev/null && [[ -d /usr/lib/postgresql ]] || need+=(postgresql)
  command -v etcd >/dev/null || need+=(etcd-server)
  command -v etcdctl >/dev/null || need+=(etcd-client)
fi
if ((${#need[@]})); then
  log "installing ${need[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [[ -z ${BENCH_PREBUILT:-} ]]; then
  log "building Release in $BUILD"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFENCEPOST_BUILD_TESTS=OFF -DFENCEPOST_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" --target fencepost raw_lmdb null_server micro_bench \
    s3_put load >/dev/null
fi
BUILD=$(cd "$BUILD" && pwd)
FENCEPOST=$BUILD/proxy/fencepost
LOAD=$BUILD/tests/bench/load
PIN_SERVER=()
PIN_CLIENT=()
if ((${BENCH_PIN:-1})) && (($(nproc) >= 2)); then
  PIN_SERVER=(taskset -c 0)
  PIN_CLIENT=(taskset -c 1)
fi

WORK=$(mktemp -d /tmp/fencepost-bench.XXXXXX)
chmod 755 "$WORK"
# Where fencepost's data directories go: the disk, or (for the A/B rounds'
# ceiling, a fencepost no disk slows) tmpfs.
FP_ROOT=$WORK
SHM=
if [[ -d /dev/shm && -w /dev/shm ]]; then SHM=$(mktemp -d /dev/shm/fencepost-bench.XXXXXX); fi
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -d $WORK/pg ]]; then
    as_postgres "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
  [[ -z $SHM ]] || rm -rf "$SHM"
}
trap cleanup EXIT

FAILED=0
ROWS=$WORK/rows.tsv
SLOWEST=$WORK/slowest  # the slowest request of each fencepost run
TAIL=$WORK/tail  # each fencepost run's latencies beside its groups and syncs
: >"$TAIL"
: >"$SLOWEST"
WARNINGS=$WORK/warnings
: >"$ROWS"
: >"$WARNINGS"
if [[ $(stat -f -c %T "$WORK") == tmpfs ]]; then
  echo "$WORK is on tmpfs: the durable runs sync nothing" >>"$WARNINGS"
fi

fail() { echo "FAIL: $*" >&2; FAILED=1; }
slow_warning() { echo "$*" >>"$WARNINGS"; }

# Warns when the machine was busy just before a run: idle under 85% of one
# second's CPU time means another load skews the figures.
busy_check() {
  local a b
  read -r -a a < <(head -1 /proc/stat)
  sleep 1
  read -r -a b < <(head -1 /proc/stat)
  local total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  local idle=$(((b[4] - a[4]) * 100 / (total > 0 ? total : 1)))
  if ((idle < 85)); then
    echo "machine busy before '$1': ${idle}% idle" >>"$WARNINGS"
  fi
}

# A port nothing listens on, below Linux's ephemeral range (32768-60999), so
# no client socket of another test can be holding it.

wait_for() {  # command... : retries for up to 10 s
  for _ in $(seq 200); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
  return 1
}


# row SYSTEM MODE CLIENTS OPS P50_MS P99_MS ACCEPTED REJECTED [P999_MS
#     SERVER_CPU_US]
row() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" \
    "$5" "$6" "$7" "$8" "${9:--}" "${10:--}" >>"$ROWS"
}

# load_row SYSTEM MODE CLIENTS LINE ACCEPTED REJECTED: a row from load's line.
load_row() {
  row "$1" "$2" "$3" "$(lf rps "$4")" "$(lf p50_ms "$4")" "$(lf p99_ms "$4")" \
    "$5" "$6" "$(lf p999_ms "$4")" "$(lf server_cpu_us "$4" | cut -d. -f1)"
}

# wrk_stats FILE -> "ops p50ms p99ms"
wrk_stats() {
  awk '
    function ms(v) {
      if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
      if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec:/ { ops = $2 }
    $1 == "50.000%" || $1 == "50%" { p50 = ms($2) }
    $1 == "99.000%" || $1 == "99%" { p99 = ms($2) }
    END { printf "%.0f %.2f %.2f\n", ops, p50, p99 }' "$1"
}



# --- fencepost ----------------------------------------------------------------
FP_PID=""
FP_DATA=""
FP_ADMIN=""
start_fencepost() {  # DATA_DIR [extra flags]
  FP_DATA=$1
  shift
  local port admin attempt
  for attempt in 1 2 3 4 5; do  # another program may take a port meanwhile
    port=$(free_port)
    admin=$(free_port)
    "${PIN_SERVER[@]}" "$FENCEPOST" serve --data-dir "$FP_DATA" \
      --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
      --log-level warn "$@" >>"$WORK/fencepost.log" 2>&1 &
    FP_PID=$!
    PIDS+=("$FP_PID")
    FP_PORT=$port
    FP_ADMIN=$admin
    if wait_for curl -fsS "http://127.0.0.1:$admin/readyz"; then return; fi
    kill "$FP_PID" 2>/dev/null || true
    wait "$FP_PID" 2>/dev/null || true
  done
  cat "$WORK/fencepost.log" >&2
  fail "fencepost did not start"
  exit 1
}

stop_fencepost() {
  kill "$FP_PID"
  wait "$FP_PID" || fail "fencepost exited with $?"
}

fence_count() { metric "$FP_ADMIN" fencepost_fences; }

# cpu_ticks PID [THREAD_NAME]: the process's user and system ticks so far,
# or those of its thread of that name.
cpu_ticks() {
  local dir=/proc/$1
  if [[ -n ${2:-} ]]; then
    dir=$(thread_dir "$1" "$2")
    [[ -n $dir ]] || { echo 0; return; }
  fi
  awk '{ print $14 + $15 }' "$dir/stat"
}

# log_histograms: the committers' histograms on the admin port now, one
# "NAME LE COUNT" line per bucket and "NAME sum|count VALUE".
log_histograms() {
  curl -fsS "http://127.0.0.1:$FP_ADMIN/metrics" | awk '
    /^fencepost_log_(group_writes|sync_seconds|group_wait_seconds)_bucket/ {
      name = $1; sub(/_bucket.*/, "", name)
      match($1, /le="[^"]*"/); print name, substr($1, RSTART + 4, RLENGTH - 5), $2 }
    /^fencepost_log_(group_writes|sync_seconds|group_wait_seconds)_(sum|count) / {
      name = $1; kind = $1; sub(/_(sum|count)$/, "", name); sub(/.*_/, "", kind)
      print name, kind, $2 }'
}
# log_quantile BEFORE AFTER NAME Q: the upper bound of the bucket holding
# the Q-quantile of what NAME counted between the two snapshots.
log_quantile() {
  awk -v n="$3" -v q="$4" '$1 != n || $2 == "sum" || $2 == "count" { next }
    NR == FNR { b[$2] = $3; next }
    { le[++k] = $2; c[k] = $3 - b[$2] }
    END { for (i = 1; i <= k; i++) if (c[k] > 0 && c[i] >= q * c[k]) { print le[i]; exit } }' "$1" "$2"
}
# log_delta BEFORE AFTER NAME sum|count
log_delta() {
  awk -v n="$3" -v f="$4" '$1 == n && $2 == f { if (NR == FNR) b = $3; else a = $3 }
    END { printf "%.6f\n", a - b }' "$1" "$2"
}
# log_tail BEFORE AFTER: writes per group (mean, p99), the share of groups
# that logged nothing, log sync p50/p99 and decision-to-answer p50/p99 (ms).
log_tail() {
  local g s n
  g=fencepost_log_group_writes
  s=fencepost_log_sync_seconds
  n=fencepost_log_group_wait_seconds
  awk -v gs="$(log_delta "$1" "$2" $g sum)" -v gc="$(log_delta "$1" "$2" $g count)" \
    -v sc="$(log_delta "$1" "$2" $s count)" -v g99="$(log_quantile "$1" "$2" $g 0.99)" \
    -v s50="$(log_quantile "$1" "$2" $s 0.5)" -v s99="$(log_quantile "$1" "$2" $s 0.99)" \
    -v n50="$(log_quantile "$1" "$2" $n 0.5)" -v n99="$(log_quantile "$1" "$2" $n 0.99)" '
    function ms(v) { return v == "+Inf" ? ">1000" : sprintf("%g", v * 1000) }
    BEGIN { printf "%.1f / ≤%s | %.0f%% | ≤%s / ≤%s | ≤%s / ≤%s\n",
      (gc > 0 ? gs / gc : 0), g99, (gc > 0 ? 100 * (gc - sc) / gc : 0),
      ms(s50), ms(s99), ms(n50), ms(n99) }'
}

# Runs a seeding wrk script until COUNT_COMMAND prints at least KEYS, then
# stops it. seed_until KEYS COUNT_COMMAND wrk-args...
seed_until() {
  local keys=$1 count=$2
  shift 2
  BENCH_KEYS=$keys BENCH_THREADS=2 wrk -t2 -c64 -d600s "$@" >/dev/null &
  local wrk_pid=$!
  while kill -0 "$wrk_pid" 2>/dev/null && (($($count) < keys)); do
    sleep 0.1
  done
  kill -INT "$wrk_pid" 2>/dev/null || true
  wait "$wrk_pid" 2>/dev/null || true
  (($($count) >= keys)) || fail "seeding stopped at $($count) of $keys keys"
}

seed_fencepost() {  # KEYS: each key once at token 2
  "$LOAD" http "127.0.0.1:$FP_PORT" --seed --keys "$1" >/dev/null
  (($(fence_count) >= $1)) || fail "seeding left $(fence_count) of $1 fences"
}

# No value may start with "stale-": every stale writer presented token 1 to a
# key seeded with token 2. Reads LMDB's files directly, after the run.
# A dump that fails, or finds no value at all, fails the check: it must not
# read as "no stale value".
check_no_stale_fencepost() {
  local landed=0 values=0 n dir dump="$WORK/values.dump"
  for dir in "$FP_DATA"/shard-*; do
    if ! mdb_dump -p -s values "$dir" >"$dump"; then
      fail "mdb_dump of $dir failed: no stale-write check ($1)"
      return
    fi
    # grep -c prints 0 and exits 1 when nothing matches; 2 is an error.
    n=$(grep -c '^ ' "$dump") || (($? == 1)) || { fail "cannot read $dump"; return; }
    values=$((values + n / 2))
    n=$(grep -c 'stale-' "$dump") || (($? == 1)) || { fail "cannot read $dump"; return; }
    landed=$((landed + n))
  done
  ((values > 0)) || fail "no value found in $FP_DATA: no stale-write check ($1)"
  ((landed == 0)) || fail "$landed stale writes landed in fencepost ($1)"
}

# disk_stat DIR: the write IOs and sectors the block device holding DIR has
# completed ("IOS SECTORS", /sys/class/block/DEV/stat), or nothing when DIR
# is on no block device (tmpfs). What the device saw: every process's
# writes, this run's among them (the machine's others are noise).
disk_stat() {
  local src
  src=$(df --output=source "$1" 2>/dev/null | tail -n1) || return 0
  [[ $src == /dev/* && -r /sys/class/block/${src#/dev/}/stat ]] || return 0
  awk '{ print $5, $7 }' "/sys/class/block/${src#/dev/}/stat"
}

# disk_per_request BEFORE AFTER REQUESTS: the device's bytes and write IOs
# per request between two disk_stat samples ("0 0" without them).
disk_per_request() {
  if [[ -z $1 || -z $2 || ${3:-0} -le 0 ]]; then
    echo "0 0"
    return
  fi
  awk -v b="$1" -v a="$2" -v n="$3" 'BEGIN {
    split(b, x, " "); split(a, y, " ")
    printf "%.0f %.2f\n", (y[2] - x[2]) * 512 / n, (y[1] - x[1]) / n }'
}

# fencepost_run LABEL CLIENTS KEYS [flags]: seeds, runs the load, checks.
fencepost_run() {
  local label=$1 clients=$2 keys=$3
  shift 3
  local dir=$FP_ROOT/fp-$RANDOM
  start_fencepost "$dir" "$@"
  seed_fencepost "$keys"
  local acc0 rej0
  acc0=$(metric "$FP_ADMIN" fencepost_writes_accepted_total)
  rej0=$(metric "$FP_ADMIN" 'fencepost_writes_rejected_total{reason="stale_token"}')
  busy_check "fencepost $label"
  log_histograms >"$WORK/hist.before"
  local out all0 applier0 disk0
  disk0=$(disk_stat "$dir")
  all0=$(cpu_ticks "$FP_PID")
  applier0=$(cpu_ticks "$FP_PID" fp-applier)
  out=$("${PIN_CLIENT[@]}" "$LOAD" http "127.0.0.1:$FP_PORT" \
    --connections "$clients" --seconds "$SECS" --keys "$keys" \
    --server-pid "$FP_PID")
  # The applier's share of the server's CPU over the whole load: what
  # LMDB behind the log costs, which Redis has no counterpart for.
  local all=$(($(cpu_ticks "$FP_PID") - all0))
  local applier=$(($(cpu_ticks "$FP_PID" fp-applier) - applier0))
  awk -v a="$applier" -v t="$all" -v cpu="$(lf server_cpu_us "$out")" \
    'BEGIN { printf "%.1f\n", (t > 0 ? cpu * a / t : 0) }' >"$WORK/last_applier"
  log_histograms >"$WORK/hist.after"
  # What the run's latencies sit beside: the committers' groups and syncs
  # (warm-up and drain included).
  printf '| %s | %s | %s / %s / %s | %s |\n' "$label" "$clients" \
    "$(lf p50_ms "$out")" "$(lf p99_ms "$out")" "$(lf p999_ms "$out")" \
    "$(log_tail "$WORK/hist.before" "$WORK/hist.after")" >>"$TAIL"
  local acc rej
  acc=$(($(metric "$FP_ADMIN" fencepost_writes_accepted_total) - acc0))
  rej=$(($(metric "$FP_ADMIN" 'fencepost_writes_rejected_total{reason="stale_token"}') - rej0))
  # Every answer the client saw, warm-up and drain included, is one the
  # server counted, and the other way round.
  if ((acc != $(lf all_ok "$out") || rej != $(lf all_stale "$out"))); then
    fail "fencepost $label: $acc accepted and $rej rejected, the client saw $out"
  fi
  (($(lf all_other "$out") == 0)) || fail "fencepost $label: answers but 2xx and 409: $out"
  ((rej > 0)) || fail "fencepost $label: no stale write was rejected"
  # No request may take a second. Speed is the full run's finding; the
  # smoke run (part of the test command, on whatever machine) only reports
  # it, and fails on counts alone.
  local slowest
  slowest=$(lf max_ms "$out" | cut -d. -f1)
  local slow=fail
  ((SMOKE)) && slow=slow_warning
  ((${slowest:-0} < 1000)) || $slow "fencepost $label: a request took ${slowest} ms"
  echo "$label ($clients clients): ${slowest} ms" >>"$SLOWEST"
  stop_fencepost
  # What the device wrote for the run, the checkpoint at the stop included.
  disk_per_request "$disk0" "$(disk_stat "$dir")" \
    "$(($(lf all_ok "$out") + $(lf all_stale "$out")))" >"$WORK/last_fp_disk"
  check_no_stale_fencepost "$label"
  load_row fencepost "$label" "$clients" "$out" "$acc" "$rej"
  lf rps "$out" | cut -d. -f1 >"$WORK/last_ops"
  echo "$out" >"$WORK/last_fp"
}

# --- the ceilings -----------------------------------------------------------
null_run() {
  local port
  port=$(free_port)
  "${PIN_SERVER[@]}" "$BUILD/tests/bench/null_server" "$port" &
  local pid=$!
  PIDS+=("$pid")
  wait_for bash -c "(: </dev/tcp/127.0.0.1/$port)"
  busy_check "null HTTP $1"
  local out
  out=$("${PIN_CLIENT[@]}" "$LOAD" http "127.0.0.1:$port" --connections "$1" \
    --seconds "$SECS" --keys "$KEYS" --server-pid "$pid")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  load_row "null HTTP server" "${2:-does nothing (ceiling)}" "$1" "$out" - -
  echo "$out" >"$WORK/last_null"
}

raw_lmdb_run() {  # BATCH
  busy_check "raw LMDB batch $1"
  local out
  out=$("$BUILD/tests/bench/raw_lmdb" --dir "$WORK/raw-$1" --batch "$1" \
    --keys "$KEYS" --seconds "$SECS")
  local ops
  ops=$(sed -n 's/.*writes_per_s=\([0-9]*\).*/\1/p' <<<"$out")
  row "raw LMDB" "$1 writes per durable commit" - "$ops" - - - -
  rm -rf "$WORK/raw-$1"
}

sync_probe() {
  local out p50 p99
  out=$("$BUILD/tests/bench/raw_lmdb" --dir "$WORK/probe" --sync-probe 1)
  p50=$(sed -n 's/.*fdatasync_p50_us=\([0-9]*\).*/\1/p' <<<"$out")
  p99=$(sed -n 's/.*fdatasync_p99_us=\([0-9]*\).*/\1/p' <<<"$out")
  row "disk" "one 4 KiB write + fdatasync" 1 - "$(awk -v v="$p50" 'BEGIN { printf "%.2f", v / 1000 }')" \
    "$(awk -v v="$p99" 'BEGIN { printf "%.2f", v / 1000 }')" - -
}

# --- the peers --------------------------------------------------------------
# redis_run [CLIENTS]: the same closed loop as fencepost's, for as long.
redis_run() {
  local clients=${1:-$CLIENTS}
  local port dir=$WORK/redis-$RANDOM
  port=$(free_port)
  mkdir -p "$dir"
  "${PIN_SERVER[@]}" redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" \
    --appendonly yes --appendfsync always --save "" --daemonize no \
    --logfile "$dir/log" &
  local pid=$!
  PIDS+=("$pid")
  wait_for redis-cli -p "$port" ping
  local cli=(redis-cli -p "$port")
  local sha
  sha=$("${cli[@]}" SCRIPT LOAD "$(cat "$BENCH/redis_cas.lua")")
  "${cli[@]}" EVAL "for i = 0, tonumber(ARGV[1]) - 1 do
      redis.call('HSET', string.format('bench:%012d', i), 't', 2, 'v', 'seed') end" \
    0 "$KEYS" >/dev/null
  busy_check "redis"
  local out disk0
  disk0=$(disk_stat "$dir")
  out=$("${PIN_CLIENT[@]}" "$LOAD" redis "127.0.0.1:$port" --sha "$sha" \
    --connections "$clients" --seconds "$SECS" --keys "$KEYS" --server-pid "$pid")
  local acc rej landed
  acc=$("${cli[@]}" HGET bench:stats accepted)
  rej=$("${cli[@]}" HGET bench:stats rejected)
  if ((acc != $(lf all_ok "$out") || rej != $(lf all_stale "$out"))); then
    fail "redis: $acc accepted and $rej rejected, the client saw $out"
  fi
  landed=$("${cli[@]}" EVAL "local n = 0
      for i = 0, tonumber(ARGV[1]) - 1 do
        local v = redis.call('HGET', string.format('bench:%012d', i), 'v')
        if v and string.sub(v, 1, 6) == 'stale-' then n = n + 1 end
      end
      return n" 0 "$KEYS")
  ((landed == 0)) || fail "$landed stale writes landed in redis"
  "${cli[@]}" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  disk_per_request "$disk0" "$(disk_stat "$dir")" "$((acc + rej))" \
    >"$WORK/last_redis_disk"
  load_row redis "Lua CAS, AOF fsync always" "$clients" "$out" "$acc" "$rej"
  echo "$out" >"$WORK/last_redis"
}

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
as_postgres() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

postgres_run() {
  local port dir=$WORK/pg sock=$WORK/pgsock
  port=$(free_port)
  mkdir -p "$sock"
  [[ $(id -u) -eq 0 ]] && chown postgres "$WORK" "$sock"
  as_postgres "$PGBIN/initdb" -D "$dir" -U bench --auth=trust >/dev/null
  as_postgres "$PGBIN/pg_ctl" -D "$dir" -l "$dir/log" -w -o \
    "-p $port -k $sock -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=100" \
    start >/dev/null
  local psql=(psql -h 127.0.0.1 -p "$port" -U bench -d postgres -qtA)
  "${psql[@]}" \
    -c "CREATE TABLE fences (key int PRIMARY KEY, token bigint NOT NULL, value text NOT NULL)" \
    -c "INSERT INTO fences SELECT g, 2, 'seed' FROM generate_series(1, $KEYS) g" \
    -c "VACUUM ANALYZE fences" >/dev/null
  busy_check "postgres"
  (cd "$WORK" && pgbench -h 127.0.0.1 -p "$port" -U bench -n -c "$CLIENTS" -j 2 \
    -T "$SECS" -D keys="$KEYS" -f "$BENCH/pg_update.sql" -l --log-prefix=pglog \
    postgres >"$WORK/pgbench.out" 2>&1) || { cat "$WORK/pgbench.out" >&2; fail "pgbench"; }
  local done_tx ops acc landed
  done_tx=$(awk '/number of transactions actually processed/ { split($NF, a, "/"); print a[1] }' "$WORK/pgbench.out")
  ops=$(awk '/^tps =/ { printf "%.0f", $3 }' "$WORK/pgbench.out")
  sleep 1  # statistics are flushed about once a second
  acc=$("${psql[@]}" -c "SELECT pg_stat_force_next_flush(); SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'fences'" | tail -1)
  landed=$("${psql[@]}" -c "SELECT count(*) FROM fences WHERE value LIKE 'stale-%'")
  ((landed == 0)) || fail "$landed stale writes landed in postgres"
  read -r p50 p99 < <(cat "$WORK"/pglog.* | awk '{ print $3 / 1000 }' | sort -n |
    awk '{ v[NR] = $1 } END { printf "%.2f %.2f\n", v[int(NR * 0.5)], v[int(NR * 0.99)] }')
  as_postgres "$PGBIN/pg_ctl" -D "$dir" -m fast stop >/dev/null
  row postgresql "UPDATE … WHERE token <= t, synchronous_commit on" "$CLIENTS" \
    "$ops" "$p50" "$p99" "$acc" "$((done_tx - acc))"
}

etcd_count() {
  ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$ETCD_PORT" get --prefix \
    bench/t/ --limit 1 --write-out json | grep -o '"count":[0-9]*' | cut -d: -f2 ||
    echo 0
}

etcd_run() {
  local port peer dir=$WORK/etcd
  port=$(free_port)
  peer=$(free_port)
  etcd --name bench --data-dir "$dir" \
    --listen-client-urls "http://127.0.0.1:$port" \
    --advertise-client-urls "http://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "bench=http://127.0.0.1:$peer" >"$WORK/etcd.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  wait_for curl -fsS "http://127.0.0.1:$port/health"
  ETCD_PORT=$port
  BENCH_SEED=1 seed_until "$KEYS" etcd_count -s "$BENCH/etcd_txn.lua" \
    "http://127.0.0.1:$port"
  busy_check "etcd"
  BENCH_KEYS=$KEYS wrk -t2 -c"$CLIENTS" -d"${SECS}s" --latency \
    -s "$BENCH/etcd_txn.lua" "http://127.0.0.1:$port" >"$WORK/wrk.out"
  local acc rej landed
  read -r acc rej < <(sed -n 's/^etcd accepted=\([0-9]*\) rejected=\([0-9]*\)/\1 \2/p' "$WORK/wrk.out")
  if ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$port" get --prefix \
    bench/v/ --print-value-only >"$WORK/etcd.values"; then
    landed=$(grep -c '^stale-' "$WORK/etcd.values") || (($? == 1)) || landed=-1
    ((landed == 0)) || fail "$landed stale writes landed in etcd (-1: unreadable)"
  else
    fail "etcdctl get failed: no stale-write check for etcd"
  fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  read -r ops p50 p99 <<<"$(wrk_stats "$WORK/wrk.out")"
  row etcd "txn compare via JSON gateway" "$CLIENTS" "$ops" "$p50" "$p99" "$acc" "$rej"
}

# --- restart-to-ready -------------------------------------------------------
# Milliseconds from starting fencepost on DIR to /readyz answering 200.
ready_ms() {
  local port admin start
  port=$(free_port)
  admin=$(free_port)
  start=$(date +%s%N)
  "$FENCEPOST" serve --data-dir "$1" --listen "127.0.0.1:$port" \
    --admin-listen "127.0.0.1:$admin" --log-level warn >>"$WORK/fencepost.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  until curl -fsS -o /dev/null "http://127.0.0.1:$admin/readyz" 2>/dev/null; do
    sleep 0.002
  done
  echo $((($(date +%s%N) - start) / 1000000))
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

# crash_ready_ms DATA_DIR KEYS: serves DATA_DIR under the write load for 3 s,
# SIGKILLs it mid-load (the log then holds writes LMDB lacks), and prints
# ready_ms of the restart, which replays them.
crash_ready_ms() {
  start_fencepost "$1"
  "$LOAD" http "127.0.0.1:$FP_PORT" --connections "$CLIENTS" --seconds 10 \
    --keys "$2" >/dev/null 2>&1 &
  local load_pid=$!
  sleep 3
  kill -9 "$FP_PID"
  wait "$FP_PID" 2>/dev/null || true
  wait "$load_pid" 2>/dev/null || true  # it stops when the server goes
  ready_ms "$1"
}

# --- the runs ---------------------------------------------------------------
log "fencepost, $CLIENTS clients, $KEYS keys"
fencepost_run "durable, $KEYS keys" "$CLIENTS" "$KEYS"
FP_OPS=$(cat "$WORK/last_ops")
log "fencepost, 1 client"
fencepost_run "durable, 1 client" 1 "$KEYS"
log "fencepost, one hot fence"
fencepost_run "durable, one hot fence" "$CLIENTS" 1
log "null HTTP server"
null_run "$CLIENTS"
null_run 1
log "raw LMDB"
raw_lmdb_run 1
raw_lmdb_run "$CLIENTS"
raw_lmdb_run 64
sync_probe
if ((PEERS)); then
  log "redis"; redis_run
  log "postgresql"; postgres_run
  log "etcd"; etcd_run
fi
# A/B rounds: fencepost and Redis back to back, BENCH_ROUNDS times at each
# of BENCH_AB_CLIENTS, so a noisy neighbour hits both alike; the ratio of
# each pair and the median ratio are printed under the table. Each round
# also loads the null server: the p99 of a server that does nothing with
# the same client, the floor of both.
AB=$WORK/ab
: >"$AB"
if ((PEERS)); then
  for c in $AB_CLIENTS; do
    for r in $(seq "$ROUNDS"); do
      log "A/B round $r, $c clients"
      fencepost_run "A/B round $r" "$c" "$KEYS"
      f=$(cat "$WORK/last_fp") applier=$(cat "$WORK/last_applier")
      fd=$(cat "$WORK/last_fp_disk")
      redis_run "$c"
      null_run "$c" "A/B round $r (the client's floor)"
      # fencepost's own ceiling: the same build with its data on tmpfs,
      # where a sync costs nothing.
      t="rps=0 p99_ms=0"
      if [[ -n $SHM ]]; then
        FP_ROOT=$SHM fencepost_run "A/B round $r, data on tmpfs" "$c" "$KEYS"
        t=$(cat "$WORK/last_fp")
        rm -rf "$FP_DATA"  # memory, not disk
      fi
      rd=$(cat "$WORK/last_redis") n=$(cat "$WORK/last_null")
      # clients round, then rps p99 p999 server-CPU client-CPU of
      # fencepost, of Redis, the null server's p99, the applier's CPU
      # per request, fencepost's rps and p99 on tmpfs, then the device's
      # bytes and write IOs per request, fencepost's and Redis's.
      echo "$c $r $(for l in "$f" "$rd"; do
        for k in rps p99_ms p999_ms server_cpu_us client_cpu_us; do
          printf '%s ' "$(lf "$k" "$l")"
        done
      done)$(lf p99_ms "$n") $applier $(lf rps "$t") $(lf p99_ms "$t") $fd $(cat "$WORK/last_redis_disk")" >>"$AB"
    done
  done
fi
RESTARTS=$WORK/restarts
: >"$RESTARTS"
for n in $SCALE; do
  log "fencepost scale run, $n fences"
  fencepost_run "durable, $n fences" "$CLIENTS" "$n"
  read -r disk_bytes disk_ios <"$WORK/last_fp_disk"
  ms=$(ready_ms "$FP_DATA")
  size=$(du -sh "$FP_DATA" | cut -f1)
  crash_ms=$(crash_ready_ms "$FP_DATA" "$n")
  echo "$n fences ($size on disk): restart to ready in ${ms} ms after a" \
    "clean stop, ${crash_ms} ms after SIGKILL under load; under load the" \
    "device wrote $disk_bytes bytes in $disk_ios write IOs per request" >>"$RESTARTS"
done

# --- the table --------------------------------------------------------------
echo
ALLOCATOR=glibc
if ldd "$FENCEPOST" | grep -q libjemalloc; then ALLOCATOR=jemalloc; fi
echo "fencepost benchmark, $(date -u +%Y-%m-%d), $(nproc) cores, $(uname -r)," \
  "${SECS}s per run, $KEYS keys, 128-byte values, ~10% stale writers," \
  "fencepost's allocator: $ALLOCATOR"
echo
echo "| system | mode | clients | ops/s | p50 ms | p99 ms | p99.9 ms | server CPU µs per request | accepted | rejected | fencepost ÷ this |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
awk -F'\t' -v fp="$FP_OPS" -v clients="$CLIENTS" '{
  ratio = ($4 > 0 && ($3 == clients || $3 == "-")) ? sprintf("%.2f×", fp / $4) : "-"
  printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $9, $10, $7, $8, ratio
}' "$ROWS"
if [[ -s $AB ]]; then
  echo
  echo "A/B rounds against Redis (AOF fsync always), back to back:"
  echo
  echo "| clients | round | ops/s fencepost / Redis | p99 ms | p99.9 ms | ops ratio | p99 ratio | server CPU µs per request (fencepost's applier) | client CPU µs per request (HTTP / RESP) | null server's p99 ms | fencepost on tmpfs: ops/s, p99 ms | device bytes per request | device write IOs per request |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  awk '{ printf "| %s | %s | %.0f / %.0f | %s / %s | %s / %s | %.2f× | %.2f× | %.1f (%.1f) / %.1f | %.1f / %.1f | %s | %.0f, %s | %s / %s | %s / %s |\n",
         $1, $2, $3, $8, $4, $9, $5, $10, ($8 > 0 ? $3 / $8 : 0),
         ($9 > 0 ? $4 / $9 : 0), $6, $14, $11, $7, $12, $13, $15, $16,
         $17, $19, $18, $20 }' "$AB"
  # ratio CLIENTS NUMERATOR DENOMINATOR LABEL: the median over the rounds
  # at CLIENTS of NUMERATOR ÷ DENOMINATOR, awk expressions over a line of
  # $AB (rounds where either is 0, which did not run, left out).
  ratio() {
    awk -v c="$1" "\$1 == c && ($2) > 0 && ($3) > 0 { print ($2) / ($3) }" "$AB" |
      sort -g | awk -v what="$4" '{ v[NR] = $1 }
        END { if (NR) printf "median %s: %.2f×\n", what, v[int((NR + 1) / 2)] }'
  }
  for c in $AB_CLIENTS; do
    ratio "$c" '$3' '$8' "throughput ratio at $c clients"
    ratio "$c" '$4' '$9' "p99 ratio at $c clients, fencepost ÷ Redis"
    # What one durable write costs each server in CPU: the gap that
    # throughput hides while the client shares the cores.
    ratio "$c" '$6' '$11' "server CPU per request at $c clients, fencepost ÷ Redis"
    ratio "$c" '$7' '$12' "client CPU per request at $c clients, HTTP ÷ RESP"
    # The bounds: fencepost's CPU without its applier (what both servers
    # do) against Redis's, and fencepost with no disk against Redis.
    ratio "$c" '$6 - $14' '$11' "server CPU per request but the applier's at $c clients, fencepost ÷ Redis"
    ratio "$c" '$15' '$8' "throughput ratio at $c clients, fencepost on tmpfs ÷ Redis on disk"
    ratio "$c" '$16' '$9' "p99 ratio at $c clients, fencepost on tmpfs ÷ Redis on disk"
    # What each acknowledged write costs the disk, counted at the device.
    ratio "$c" '$17' '$19' "device bytes per request at $c clients, fencepost ÷ Redis"
    ratio "$c" '$18' '$20' "device write IOs per request at $c clients, fencepost ÷ Redis"
  done
fi
if [[ -s $TAIL ]]; then
  echo
  echo "Each fencepost run's latency beside its committers' groups and log syncs (from /metrics; bucket bounds, so ≤):"
  echo
  echo "| run | clients | latency p50 / p99 / p99.9 ms | writes per group, mean / p99 | groups that logged nothing | log sync p50 / p99 ms | decision to answer p50 / p99 ms |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  cat "$TAIL"
fi
if [[ -s $RESTARTS ]]; then
  echo
  sed 's/^/- /' "$RESTARTS"
fi
if [[ -s $SLOWEST ]]; then
  echo
  echo "Slowest fencepost request of each run (none may take 1 s; the smoke run only warns):"
  echo
  sed 's/^/- /' "$SLOWEST"
fi
if [[ -s $WARNINGS ]]; then
  echo
  sed 's/^/WARNING: /' "$WARNINGS"
fi
if ((MICRO)); then
  echo
  "$BUILD/tests/bench/micro_bench" --benchmark_min_time=0.2 \
    2>/dev/null
fi
if ((${BENCH_S3:-1})); then
  echo
  s3_args=()
  ((SMOKE)) && s3_args=(--smoke)
  BENCH_PREBUILT=$BUILD "$BENCH/s3.sh" "${s3_args[@]}" || fail "tests/bench/s3.sh"
fi
((FAILED == 0)) || { echo "FAILED: see the messages above" >&2; exit 1; }
