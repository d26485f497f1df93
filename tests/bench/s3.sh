#!/usr/bin/env bash
# What guarding a bucket costs: PutObject straight to a real Ceph RGW
# (signed by the client, tests/bench/s3_put.cc) against the same clients'
# fenced PUTs through fencepost's s3:// backend to the same RGW, in one run:
# BENCH_CLIENTS clients (32), one keep-alive connection each, 4 KiB objects,
# each client over keys of its own. A third phase, door, sends direct's
# signed PutObject (the token in x-amz-meta-fencing-token) to the same
# fencepost's S3 front door (--s3-listen), signed with a key of its
# --s3-client-credentials: what an S3 client pointed at fencepost costs.
# The phases alternate for BENCH_S3_ROUNDS rounds, so a neighbour's load
# hits them alike; each round prints the ratios fenced ÷ direct and
# door ÷ direct. A fourth phase (unless BENCH_S3_TMPFS=0) sends the fenced
# PUTs to a second fencepost whose fences live on tmpfs
# (/dev/shm): not a safe set-up (a power cut loses the fences), a diagnosis
# that splits fencepost's cost into the fence's fdatasync and the rest.
# Then the boto3 phase (tests/bench/s3_boto3.py, Debian's python3-boto3):
# one client, BENCH_S3_BOTO3 sequential put_object calls of SIZE bytes to
# RGW straight and as many through the front door (token in Metadata),
# in turn (and, with the tmpfs phase, through that fencepost's front door
# too); p50/p99 per call of each, and the p50 difference (issue 38's goal:
# at most 1 ms). Then, unless BENCH_PERF=0, one more phase of each
# of BENCH_PERF_MODES under `perf record -g` on fencepost, and its top
# symbols.
#
#   tests/bench/s3.sh            # about 3 minutes (the cluster starts in ~15 s)
#   tests/bench/s3.sh --smoke    # 2 s per phase, 50 boto3 calls each, no
#                                # tmpfs phase, no perf; checks only that
#                                # the counts add up
#
# Environment: BENCH_SECONDS (10; smoke 2), BENCH_CLIENTS (32),
# BENCH_S3_SIZE (4096), BENCH_S3_KEYS (64 per client), BENCH_S3_ROUNDS (2),
# BENCH_S3_TMPFS (1), BENCH_S3_BOTO3 (1000 calls per target; smoke 50; 0
# skips), BENCH_PERF (1), BENCH_PERF_MODES ("fenced door"),
# BENCH_PREBUILT=DIR uses the binaries of an existing build (configured
# with FENCEPOST_BUILD_BENCH=ON) instead of building Release.
#
# The cluster (tests/coordination/rgw.sh: one monitor, one memstore OSD, one
# radosgw, all on 127.0.0.1) and fencepost run in a temp directory and are
# stopped on exit. Checks, never timings: no request failed, fencepost
# accepted exactly the fenced PUTs its clients saw answered 2xx, the objects
# hold the bytes and the token, a stale token is refused through the data
# port and through the front door. Exit
# status 1 when a check fails.
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
SIZE=${BENCH_S3_SIZE:-4096}
KEYS=${BENCH_S3_KEYS:-64}
ROUNDS=${BENCH_S3_ROUNDS:-2}
PERF=${BENCH_PERF:-1}
TMPFS=${BENCH_S3_TMPFS:-1}
BOTO3=${BENCH_S3_BOTO3:-1000}
BOTO3_WARMUP=50
PERF_MODES=${BENCH_PERF_MODES:-fenced door}
WARMUP=1
if ((SMOKE)); then
  SECS=${BENCH_SECONDS:-2}
  BOTO3=${BENCH_S3_BOTO3:-50}
  BOTO3_WARMUP=5
  ROUNDS=1
  PERF=0
  TMPFS=0
  WARMUP=0.5
fi
[[ -d /dev/shm ]] || TMPFS=0
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
  cmake --build "$BUILD" --target fencepost s3_put raw_lmdb >/dev/null
fi
BUILD=$(cd "$BUILD" && pwd)
FENCEPOST=$BUILD/proxy/fencepost
S3_PUT=$BUILD/tests/bench/s3_put
[[ -x $S3_PUT ]] || { echo "no $S3_PUT (FENCEPOST_BUILD_BENCH=ON?)" >&2; exit 1; }
if ((PERF)) && ! command -v perf >/dev/null; then
  log "perf not found: no profile"
  PERF=0
fi
if ((BOTO3)) && ! /usr/bin/python3 -c 'import boto3' 2>/dev/null; then
  log "no boto3 for /usr/bin/python3 (scripts/deps.sh): no boto3 phase"
  BOTO3=0
fi

WORK=$(mktemp -d /tmp/fencepost-s3bench.XXXXXX)
SHM=""
# The fencepost of each fenced mode: fenced (fences on disk; door goes to
# its front door), tmpfs.
declare -A FP_PID FP_PORT FP_ADMIN FP_S3_PORT
cleanup() {
  local pid
  for pid in "${FP_PID[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${FP_PID[@]}"; do wait "$pid" 2>/dev/null || true; done
  tests/coordination/rgw.sh stop "$WORK/rgw" >/dev/null 2>&1 || true
  rm -rf "$WORK" ${SHM:+"$SHM"}
}
trap cleanup EXIT

# Copies, so that a rebuild of a shared build directory mid-run neither
# changes the binaries nor hides fencepost's symbols from perf.
cp "$FENCEPOST" "$WORK/fencepost"
cp "$S3_PUT" "$WORK/s3_put"
FENCEPOST=$WORK/fencepost
S3_PUT=$WORK/s3_put

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
# The front door's client key (fencepost's own; never the store's).
DOOR_KEY_ID=bench-client
DOOR_SECRET=$(head -c 30 /dev/urandom | base64 | tr -d '+/=' | head -c 40)
DOOR_CREDENTIALS=$WORK/door-credentials
echo "$DOOR_KEY_ID $DOOR_SECRET" >"$DOOR_CREDENTIALS"
chmod 600 "$DOOR_CREDENTIALS"
OSD_PID=$(<"$WORK/rgw/run/osd.daemon")

wait_for() {  # command... : retries for up to 10 s
  for _ in $(seq 200); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done
  return 1
}

start_fencepost() {  # MODE DATA_DIR
  local mode=$1 dir=$2 port admin s3
  for _ in 1 2 3 4 5; do  # another program may take a port meanwhile
    port=$(free_port)
    admin=$(free_port)
    s3=$(free_port)
    "$FENCEPOST" serve --data-dir "$dir" --listen "127.0.0.1:$port" \
      --admin-listen "127.0.0.1:$admin" --log-level warn \
      --backend "s3://$S3_BUCKET" --s3-endpoint "$S3_ENDPOINT" \
      --s3-region "$S3_REGION" --s3-listen "127.0.0.1:$s3" \
      --s3-client-credentials "$DOOR_CREDENTIALS" \
      >>"$WORK/fencepost.log" 2>&1 &
    FP_PID[$mode]=$!
    FP_PORT[$mode]=$port
    FP_ADMIN[$mode]=$admin
    FP_S3_PORT[$mode]=$s3
    if wait_for curl -fsS "http://127.0.0.1:$admin/readyz"; then return; fi
    kill "${FP_PID[$mode]}" 2>/dev/null || true
    wait "${FP_PID[$mode]}" 2>/dev/null || true
  done
  cat "$WORK/fencepost.log" >&2
  echo "FAIL: fencepost did not start" >&2
  exit 1
}
log "starting fencepost (s3://$S3_BUCKET)"
start_fencepost fenced "$WORK/fp"
MODES=(direct fenced door)
if ((TMPFS)); then
  SHM=$(mktemp -d /dev/shm/fencepost-s3bench.XXXXXX)
  start_fencepost tmpfs "$SHM/fp"
  MODES+=(tmpfs)
fi

# cpu_ticks PID: the process's user plus system time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# cpu_us TICKS REQUESTS: CPU microseconds per request.
cpu_us() { echo $(($1 * 1000000 / $(getconf CLK_TCK) / ($2 > 0 ? $2 : 1))); }
# field NAME LINE: the value of NAME=value in s3_put's line.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# load MODE [extra s3_put args]: one s3_put run, its line on stdout. Each
# mode writes objects under a prefix of its own (its name).
load() {
  local mode=$1 target keys=()
  shift
  if [[ $mode == direct ]]; then
    target=(direct "$S3_ENDPOINT" "$S3_BUCKET" --region "$S3_REGION")
  elif [[ $mode == door ]]; then
    target=(door "http://127.0.0.1:${FP_S3_PORT[fenced]}" "$S3_BUCKET"
      --region "$S3_REGION")
    # The client's key, in the variables s3_put signs with.
    keys=(-u AWS_SESSION_TOKEN "AWS_ACCESS_KEY_ID=$DOOR_KEY_ID"
      "AWS_SECRET_ACCESS_KEY=$DOOR_SECRET")
  else
    target=(fenced "http://127.0.0.1:${FP_PORT[$mode]}")
  fi
  timeout $((SECS * 3 + 60)) env "${keys[@]}" "$S3_PUT" "${target[@]}" \
    --token "$TOKEN" --prefix "$mode" --clients "$CLIENTS" \
    --seconds "$SECS" --warmup "$WARMUP" --size "$SIZE" --keys "$KEYS" "$@"
}

# phase MODE ROUND: runs the load, checks its counts, appends a row:
# ROUND MODE OPS P50 P99 MAX OK FAILED CPU_FP CPU_RGW CPU_OSD CPU_CLIENT
phase() {
  local mode=$1 round=$2 out
  # The fencepost this mode loads; direct: the fenced one, which must see
  # nothing; door: the fenced one's front door.
  local fp_mode=$mode
  [[ $mode == direct || $mode == door ]] && fp_mode=fenced
  local fp_pid=${FP_PID[$fp_mode]} fp_admin=${FP_ADMIN[$fp_mode]}
  local fp0 rgw0 osd0 acc0
  fp0=$(cpu_ticks "$fp_pid")
  rgw0=$(cpu_ticks "$RGW_PID")
  osd0=$(cpu_ticks "$OSD_PID")
  acc0=$(metric "$fp_admin" fencepost_writes_accepted_total)
  out=$(load "$mode") || { fail "$mode round $round: s3_put exited with $?"; return; }
  local fp rgw osd acc all_ok all_failed requests
  fp=$(($(cpu_ticks "$fp_pid") - fp0))
  rgw=$(($(cpu_ticks "$RGW_PID") - rgw0))
  osd=$(($(cpu_ticks "$OSD_PID") - osd0))
  acc=$(($(metric "$fp_admin" fencepost_writes_accepted_total) - acc0))
  all_ok=$(field all_ok "$out")
  all_failed=$(field all_failed "$out")
  requests=$((all_ok + all_failed))
  ((all_failed == 0)) || fail "$mode round $round: $all_failed requests failed"
  (($(field ok "$out") > 0)) || fail "$mode round $round: no request succeeded"
  if [[ $mode != direct ]]; then
    ((acc == all_ok)) ||
      fail "$mode round $round: fencepost accepted $acc, its clients saw $all_ok"
  else
    ((acc == 0)) || fail "direct round $round: fencepost accepted $acc writes"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$mode" \
    "$(field ops_per_s "$out")" "$(field p50_ms "$out")" \
    "$(field p99_ms "$out")" "$(field max_ms "$out")" "$(field ok "$out")" \
    "$(field failed "$out")" \
    "$(if [[ $mode != direct ]]; then cpu_us "$fp" "$requests"; else echo -; fi)" \
    "$(cpu_us "$rgw" "$requests")" "$(cpu_us "$osd" "$requests")" \
    "$(field client_cpu_us_per_req "$out")" >>"$ROWS"
}

for round in $(seq "$ROUNDS"); do
  for mode in "${MODES[@]}"; do
    log "round $round: $mode"
    phase "$mode" "$round"
  done
done

# --- boto3, one client --------------------------------------------------------
# line NAME OUTPUT: the line of s3_boto3.py's output for target NAME.
line() { grep "^mode=boto3-$1 " <<<"$2" || true; }
BOTO3_OUT=""
if ((BOTO3)); then
  log "boto3: $BOTO3 put_object calls straight to RGW and $BOTO3 through the front door, alternating"
  # With the tmpfs fencepost, its front door too (door-tmpfs).
  BOTO3_TARGETS=(direct door)
  tmpfs_door=()
  if ((TMPFS)); then
    BOTO3_TARGETS+=(door-tmpfs)
    tmpfs_door=(--door-tmpfs "http://127.0.0.1:${FP_S3_PORT[tmpfs]}")
    tmpfs_acc0=$(metric "${FP_ADMIN[tmpfs]}" fencepost_writes_accepted_total)
  fi
  acc0=$(metric "${FP_ADMIN[fenced]}" fencepost_writes_accepted_total)
  if BOTO3_OUT=$(timeout $((BOTO3 / 10 + 120)) /usr/bin/python3 \
    "$BENCH/s3_boto3.py" "$S3_ENDPOINT" \
    "http://127.0.0.1:${FP_S3_PORT[fenced]}" "$S3_BUCKET" \
    "$DOOR_CREDENTIALS" --count "$BOTO3" --warmup "$BOTO3_WARMUP" \
    --size "$SIZE" --keys "$KEYS" --region "$S3_REGION" --token "$TOKEN" \
    "${tmpfs_door[@]}"); then
    acc=$(($(metric "${FP_ADMIN[fenced]}" fencepost_writes_accepted_total) - acc0))
    for target in "${BOTO3_TARGETS[@]}"; do
      l=$(line "$target" "$BOTO3_OUT")
      [[ -n $l ]] || { fail "boto3 $target: no result"; continue; }
      (($(field all_failed "$l") == 0)) ||
        fail "boto3 $target: $(field all_failed "$l") calls failed"
      (($(field count "$l") == BOTO3)) ||
        fail "boto3 $target: $(field count "$l") calls counted, not $BOTO3"
    done
    door_ok=$(field all_ok "$(line door "$BOTO3_OUT")")
    ((acc == ${door_ok:-0})) ||
      fail "boto3: fencepost accepted $acc writes, the door's client saw ${door_ok:-0}"
    if ((TMPFS)); then
      acc=$(($(metric "${FP_ADMIN[tmpfs]}" fencepost_writes_accepted_total) - tmpfs_acc0))
      door_ok=$(field all_ok "$(line door-tmpfs "$BOTO3_OUT")")
      ((acc == ${door_ok:-0})) ||
        fail "boto3: the tmpfs fencepost accepted $acc writes, its door's client saw ${door_ok:-0}"
    fi
  else
    fail "boto3: s3_boto3.py exited with $?"
  fi
fi

# --- the checks on the bucket -------------------------------------------------
# HeadObject with curl's own SigV4 (independent of fencepost's signer and
# quicker to start than boto3); RGW wants x-amz-content-sha256.
check_object() {  # KEY
  local head status length token
  head=$(curl -sS -I --max-time 20 --aws-sigv4 "aws:amz:$S3_REGION:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    "$S3_ENDPOINT/$S3_BUCKET/$1" | tr -d '\r') || { fail "HeadObject $1: curl failed"; return; }
  status=$(awk 'NR == 1 { print $2 }' <<<"$head")
  length=$(awk 'tolower($1) == "content-length:" { print $2 }' <<<"$head")
  token=$(awk 'tolower($1) == "x-amz-meta-fencing-token:" { print $2 }' <<<"$head")
  [[ $status == 200 ]] || { fail "HeadObject $1 answered '$status'"; return; }
  [[ $length == "$SIZE" ]] || fail "$1 holds '$length' bytes, not $SIZE"
  [[ $token == "$TOKEN" ]] || fail "$1's fencing-token metadata is '$token', not $TOKEN"
}
log "checking the objects"
# s3_put sends the same metadata direct as fencepost does.
for mode in "${MODES[@]}"; do check_object "$mode/c0/k0"; done
if ((BOTO3)); then
  for target in "${BOTO3_TARGETS[@]}"; do check_object "boto3-$target/k0"; done
fi
stale=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Fencing-Token: 1' \
  --data-binary stale "http://127.0.0.1:${FP_PORT[fenced]}/fenced/c0/k0")
[[ $stale == 409 ]] || fail "a stale PUT (token 1 < $TOKEN) answered $stale, not 409"
# Through the front door, signed with the client's key: S3's error XML.
stale=$(curl -s -w ' %{http_code}' -X PUT --aws-sigv4 "aws:amz:$S3_REGION:s3" \
  --user "$DOOR_KEY_ID:$DOOR_SECRET" -H 'x-amz-meta-fencing-token: 1' \
  -H "x-amz-content-sha256: $(printf stale | sha256sum | cut -d' ' -f1)" \
  --data-binary stale \
  "http://127.0.0.1:${FP_S3_PORT[fenced]}/$S3_BUCKET/door/c0/k0")
[[ $stale == *'<Code>StaleFencingToken</Code>'*' 409' ]] ||
  fail "a stale PutObject through the front door answered '$stale', not 409 StaleFencingToken"
check_object door/c0/k0  # unchanged

# --- the disk under the fences ------------------------------------------------
DISK=""
if ((!SMOKE)) && [[ -x $BUILD/tests/bench/raw_lmdb ]]; then
  log "the disk: one 4 KiB write + fdatasync"
  probe=$("$BUILD/tests/bench/raw_lmdb" --dir "$WORK/probe" --sync-probe 1)
  DISK=$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] / 1000 } }
    END { printf "p50 %.2f ms, p99 %.2f ms", v["fdatasync_p50_us"], v["fdatasync_p99_us"] }' <<<"$probe")
fi

# --- the profile ------------------------------------------------------------
PERF_OUT=$WORK/perf.txt
# profile MODE: one more phase of MODE, fencepost under perf record -g; its
# row (round "perf") and its top symbols (appended to PERF_OUT).
profile() {
  local mode=$1 data=$WORK/perf-$1.data out
  log "$mode PUTs again, fencepost under perf record -g"
  perf record -g -F 2999 -p "${FP_PID[fenced]}" -o "$data" -- \
    sleep "$(awk -v s="$SECS" -v w="$WARMUP" 'BEGIN { print s + w }')" \
    >"$WORK/perf.log" 2>&1 &
  local perf_pid=$!
  if out=$(load "$mode"); then
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t-\t-\t-\t%s\n' perf "$mode, under perf" \
      "$(field ops_per_s "$out")" "$(field p50_ms "$out")" \
      "$(field p99_ms "$out")" "$(field max_ms "$out")" "$(field ok "$out")" \
      "$(field failed "$out")" "$(field client_cpu_us_per_req "$out")" >>"$ROWS"
  fi
  if ! wait "$perf_pid"; then
    echo "perf record failed (not permitted here?): $(tail -3 "$WORK/perf.log")" >>"$PERF_OUT"
    return
  fi
  # top LINES perf-report-args: the first LINES entries by self time,
  # each squeezed, a template's name cut at 110 characters. (awk reads
  # to the end: no SIGPIPE for pipefail to see.)
  top() {
    local lines=$1
    shift
    perf report -i "$data" --no-children -g none --stdio "$@" \
      2>/dev/null | awk -v n="$lines" '/%/ && shown < n {
        $1 = $1; sub(/ - -$/, ""); print "    " substr($0, 1, 110); shown++ }'
  }
  {
    echo "fencepost under perf record -g -F 2999 during the $mode phase, self time:"
    echo
    echo "  by library:"
    top 8 --sort dso --percent-limit 1
    echo "  top symbols:"
    top 15 --sort symbol
    echo "  top symbols of fencepost's own code:"
    top 10 --sort symbol --dsos fencepost
    echo
  } >>"$PERF_OUT"
}
if ((PERF)); then
  for mode in $PERF_MODES; do profile "$mode"; done
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
  if ($2 == "door") path = "PutObject through the S3 front door (signed)"
  if ($2 == "tmpfs") path = "fenced PUT, fences on tmpfs (diagnosis, unsafe)"
  printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s / %s |\n",
    $1, path, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 }' "$ROWS"
echo
awk -F'\t' '
  $2 == "direct" { d[$1] = $3; dp[$1] = $5 }
  $2 == "fenced" { f[$1] = $3; fp[$1] = $5 }
  $2 == "tmpfs" { t[$1] = $3; tp[$1] = $5 }
  $2 == "door" { o[$1] = $3; op[$1] = $4 }
  $2 == "direct" { dp50[$1] = $4 }
  END {
    for (r in d) if (r in f && d[r] > 0) {
      ratio = f[r] / d[r]; extra = fp[r] - dp[r]
      printf "round %s: fenced ÷ direct throughput %.2f×, p99 %+.2f ms (goal: ≥ 0.90×, ≤ +1 ms: %s)", \
        r, ratio, extra, (ratio >= 0.9 && extra <= 1) ? "met" : "not met"
      if (r in t) printf "; fences on tmpfs: %.2f×, p99 %+.2f ms", t[r] / d[r], tp[r] - dp[r]
      if (r in o) printf "; door ÷ direct: %.2f×, p50 %+.2f ms", o[r] / d[r], op[r] - dp50[r]
      printf "\n"
    }
  }' "$ROWS" | sort
if [[ -n $BOTO3_OUT ]]; then
  echo
  echo "boto3 $(/usr/bin/python3 -c 'import boto3; print(boto3.__version__)'), one client," \
    "$BOTO3 sequential put_object calls of $SIZE bytes to each (after $BOTO3_WARMUP)," \
    "in turn, the token in Metadata:"
  echo
  echo "| path | p50 ms | p99 ms | max ms | mean ms | calls | failed |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  for target in "${BOTO3_TARGETS[@]}"; do
    l=$(line "$target" "$BOTO3_OUT")
    case $target in
      direct) path="put_object straight to RGW" ;;
      door) path="put_object through the S3 front door" ;;
      door-tmpfs) path="put_object through the front door, fences on tmpfs (diagnosis, unsafe)" ;;
    esac
    echo "| $path | $(field p50_ms "$l") | $(field p99_ms "$l") |" \
      "$(field max_ms "$l") | $(field mean_ms "$l") | $(field count "$l") |" \
      "$(field failed "$l") |"
  done
  echo
  awk -v d="$(field p50_ms "$(line direct "$BOTO3_OUT")")" \
    -v o="$(field p50_ms "$(line door "$BOTO3_OUT")")" \
    -v t="$(field p50_ms "$(line door-tmpfs "$BOTO3_OUT")")" 'BEGIN {
    printf "boto3 through the front door: p50 %+.2f ms (goal: ≤ +1 ms: %s)",
      o - d, (o - d <= 1) ? "met" : "not met"
    if (t != "") printf "; fences on tmpfs: p50 %+.2f ms", t - d
    printf "\n" }'
fi
if [[ -n $DISK ]]; then
  echo
  echo "The disk under the fences (fencepost's data dir): one 4 KiB write + fdatasync, $DISK."
  echo "Every fenced PUT here carries token $TOKEN: the first one of each key raises its fence,"
  echo "which is made durable before the PutObject (SPEC); the others ride on that raise and"
  echo "wait for no fdatasync. RGW's memstore OSD keeps objects in memory."
fi
if [[ -s $PERF_OUT ]]; then
  echo
  cat "$PERF_OUT"
fi
((FAILED == 0)) || { echo "FAILED: see the messages above" >&2; exit 1; }
