#!/usr/bin/env bash
# Replicas sharing fences in etcd, measured in one run on 127.0.0.1: durable
# fenced writes/s and latency through 1, 2 and 3 fencepost replicas
# (--fence-store etcd://, --backend etcd) over a real 3-member etcd cluster,
# against one fencepost on its local LMDB and against etcd alone committing
# the same write as one transaction; lease renewals and grants through
# one replica against the same on LMDB; then how long writes fail when
# the etcd leader is killed, and when a replica is killed.
#
#   tests/bench/replicas.sh     # BENCH_SECONDS (10), BENCH_CLIENTS (32),
#                               # BENCH_KEYS (10000), BENCH_PREBUILT=DIR
#
# The workload is tests/bench/fenced_put.lua (128-byte values, one writer in
# ten a stale leader). With several replicas the clients are split evenly
# among them, one wrk each, all at once: ops add up, and the p50/p99 shown
# are the worst of the replicas'.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
ROOT=$PWD
BENCH=$ROOT/tests/bench
SECS=${BENCH_SECONDS:-10}
CLIENTS=${BENCH_CLIENTS:-32}
KEYS=${BENCH_KEYS:-10000}
BUILD=${BENCH_PREBUILT:-build-bench}

if [[ -z ${BENCH_PREBUILT:-} ]]; then
  scripts/deps.sh
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" --target fencepost >/dev/null
fi
command -v wrk >/dev/null || { echo "wrk is required (apt-get install wrk)" >&2; exit 1; }
FENCEPOST=$(find "$BUILD" -path '*/proxy/fencepost' -type f | head -1)
[[ -x $FENCEPOST ]] || { echo "no fencepost binary under $BUILD" >&2; exit 1; }

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  tests/coordination/etcd_cluster.sh stop "$WORK/etcd" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

. tests/coordination/lib.sh  # free_port

wait_ready() {  # ADMIN_PORT
  for _ in $(seq 1 200); do
    curl -fsS "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "a fencepost did not get ready" >&2
  cat "$WORK"/fp-*.log >&2
  exit 1
}

PORTS=()
ADMINS=()
start() {  # NAME [flags]: appends to PORTS and ADMINS
  local name=$1 port admin
  shift
  port=$(free_port)
  admin=$(free_port)
  "$FENCEPOST" serve --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
    --log-level warn "$@" >>"$WORK/fp-$name.log" 2>&1 &
  PIDS+=($!)
  PORTS+=("$port")
  ADMINS+=("$admin")
  wait_ready "$admin"
}

stop_all_fenceposts() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
  PORTS=()
  ADMINS=()
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

# load LABEL: runs wrk against every port in PORTS at once, prints a row.
load() {
  local label=$1 n=${#PORTS[@]} i
  local per=$((CLIENTS / n)) wrks=()
  for i in "${!PORTS[@]}"; do
    BENCH_KEYS=$KEYS wrk -t1 -c"$per" -d"${SECS}s" --latency \
      -s "$BENCH/fenced_put.lua" "http://127.0.0.1:${PORTS[$i]}" >"$WORK/wrk-$i.out" &
    wrks+=($!)
  done
  wait "${wrks[@]}"
  local ops=0 p50=0 p99=0 o a b
  for i in "${!PORTS[@]}"; do
    read -r o a b <<<"$(wrk_stats "$WORK/wrk-$i.out")"
    ops=$((ops + o))
    p50=$(awk -v x="$p50" -v y="$a" 'BEGIN { print (y > x ? y : x) }')
    p99=$(awk -v x="$p99" -v y="$b" 'BEGIN { print (y > x ? y : x) }')
  done
  printf '%-42s %8s %8s %8s\n' "$label" "$ops" "$p50" "$p99"
  echo "$ops" >"$WORK/last-ops"
}

# outage ACTION...: sequential fenced PUTs (one client) through the first
# port of PORTS, and the next one when a request fails; runs ACTION after
# 1 s; prints the longest stretch without an acknowledged write.
outage() {
  python3 - "$@" <<'EOF' "${PORTS[@]}"
import http.client, subprocess, sys, time
args = sys.argv[1:]
split = args.index("--")
action, ports = args[:split], [int(p) for p in args[split + 1:]]
token, last_ok, worst, which = 1, time.monotonic(), 0.0, 0
start = time.monotonic()
acted = False
seen = {}
while time.monotonic() - start < 6:
    if not acted and time.monotonic() - start > 1:
        subprocess.Popen(action)
        acted = True
    token = time.time_ns() // 1000
    try:
        c = http.client.HTTPConnection("127.0.0.1", ports[which % len(ports)], timeout=2)
        c.request("PUT", "/outage", body="x", headers={"Fencing-Token": str(token)})
        status = c.getresponse().status
        c.close()
    except OSError:
        status = 0
    now = time.monotonic()
    if 200 <= status < 300:
        worst = max(worst, now - last_ok)
        last_ok = now
    elif status == 0:
        which += 1  # a dead replica: the next one, as a load balancer would
    seen[status] = seen.get(status, 0) + 1
    time.sleep(0.002)
print("%.0f ms (answers: %s)" % (worst * 1000, ", ".join(
    "%s %d" % ("no answer" if s == 0 else s, n) for s, n in sorted(seen.items()))))
EOF
}

ENDPOINTS=$(tests/coordination/etcd_cluster.sh start "$WORK/etcd")
echo "etcd cluster: $ENDPOINTS ($(etcd --version | head -1))" >&2
printf '%-42s %8s %8s %8s\n' "setup ($CLIENTS clients, $KEYS keys, ${SECS}s)" "ops/s" "p50 ms" "p99 ms"

# leases LABEL: lease renewals, then grants, through the first admin port of
# ADMINS (tests/bench/lease.lua), a row each. The leases the renewals' row
# renews are granted first, unmeasured, CLIENTS at a time.
leases() {
  local mode
  seq 1 "${BENCH_LEASES:-1000}" | xargs -P "$CLIENTS" -I{} curl -fsS -o /dev/null -X PUT \
    -d '{"holder":"holder-{}","ttl_ms":600000}' \
    "http://127.0.0.1:${ADMINS[0]}/v1/leases/bench/renew-{}"
  for mode in renew grant; do
    BENCH_LEASE_MODE=$mode wrk -t1 -c"$CLIENTS" -d"${SECS}s" --latency \
      -s "$BENCH/lease.lua" "http://127.0.0.1:${ADMINS[0]}" >"$WORK/wrk-lease.out"
    grep -q '^non-200 answers: 0$' "$WORK/wrk-lease.out" ||
      { echo "lease $mode: $(grep non-200 "$WORK/wrk-lease.out")" >&2; exit 1; }
    printf '%-42s %8s %8s %8s\n' "$1, lease ${mode}s" $(wrk_stats "$WORK/wrk-lease.out")
  done
}

start lmdb --data-dir "$WORK/lmdb"
load "1 fencepost, local LMDB"
leases "1 fencepost, local LMDB"
stop_all_fenceposts

# etcd's own ceiling on this machine: the same fenced write as one etcd
# transaction (tests/bench/etcd_txn.lua) from one client pool, straight to
# the first member's JSON gateway, after 3 s of seeding the keys.
ETCD1=${ENDPOINTS%%,*}
BENCH_SEED=1 BENCH_KEYS=$KEYS wrk -t2 -c"$CLIENTS" -d3s \
  -s "$BENCH/etcd_txn.lua" "http://$ETCD1" >/dev/null
BENCH_KEYS=$KEYS wrk -t2 -c"$CLIENTS" -d"${SECS}s" --latency \
  -s "$BENCH/etcd_txn.lua" "http://$ETCD1" >"$WORK/wrk-etcd.out"
printf '%-42s %8s %8s %8s\n' "etcd alone, the write as one txn" \
  $(wrk_stats "$WORK/wrk-etcd.out")

for n in 1 2 3; do
  for i in $(seq 1 "$n"); do
    start "r$n-$i" --fence-store "etcd://$ENDPOINTS/bench$n" --backend etcd
  done
  load "$n replica(s), fences and values in etcd"
  [[ $n == 1 ]] && leases "1 replica, leases in etcd"
  stop_all_fenceposts
done

echo "failover (one client, sequential writes; longest gap between acknowledged writes):"
for i in 1 2 3; do
  start "f$i" --fence-store "etcd://$ENDPOINTS/failover" --backend etcd
done
printf '  %-32s %s\n' "the client's replica killed" \
  "$(outage kill -9 "${PIDS[0]}" -- )"
leader=$(for i in 1 2 3; do
  port=$(cat "$WORK/etcd/client-$i")
  curl -s -X POST "http://127.0.0.1:$port/v3/maintenance/status" -d '{}' |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(int(d["header"]["member_id"]) == int(d["leader"]))' |
    grep -q True && echo "$i" || true
done | head -1)
printf '  %-32s %s\n' "etcd leader (member $leader) killed" \
  "$(outage tests/coordination/etcd_cluster.sh stop-member "$WORK/etcd" "$leader" kill -- )"
