#!/usr/bin/env bash
# A real S3 store for the tests: a one-node Ceph cluster from Debian's
# packages (ceph-mon, ceph-osd, radosgw 16.2) on 127.0.0.1, every file of it
# in DIR, no systemd, nothing under /etc/ceph or /var/lib/ceph.
#   rgw.sh start DIR   starts one monitor, one OSD (memstore: objects kept in
#                      memory), one radosgw (beast frontend on a free port),
#                      makes an S3 user and a bucket, writes DIR/env and
#                      prints it:
#                        S3_ENDPOINT=http://127.0.0.1:PORT
#                        S3_REGION=us-east-1
#                        S3_BUCKET=fencepost
#                        AWS_ACCESS_KEY_ID=...  (new for each start)
#                        AWS_SECRET_ACCESS_KEY=...
#                        CEPH_CONF=DIR/ceph.conf
#                      (`. DIR/env` in a shell; `set -a` first to export).
#   rgw.sh start DIR OWNER_PID
#                      the same, and the cluster is stopped and DIR removed
#                      (by a watcher in the background, checking each second)
#                      once process OWNER_PID has ended, however it ended:
#                      a test that crashes leaves no daemons behind.
#   rgw.sh stop DIR    stops the three daemons, waits for them, removes DIR
#   rgw.sh gateway-stop DIR
#                      kills radosgw alone (SIGKILL, as a crash) and waits
#                      for it to exit; the objects stay in the OSD
#   rgw.sh gateway-start DIR
#                      starts radosgw again, same config, same port, and
#                      waits until it answers (RGW_START_TIMEOUT)
#   rgw.sh gateway-pid DIR
#                      prints radosgw's pid (exit 1 when it does not run)
# Every wait is bounded (RGW_START_TIMEOUT seconds in all, default 90); on
# failure the daemons' logs go to stderr and what was started is stopped.
# Inside the cluster there is no authentication (auth_* = none, and so crc
# connections: radosgw asks for secure ones to the monitor by default, which
# need cephx); the S3 port checks SigV4 signatures as usual. Each OSD gets its own uuid and is put in
# the CRUSH map by hand: an OSD made without one sometimes never comes up.
set -euo pipefail

start_timeout_s=${RGW_START_TIMEOUT:-90}
bucket=${RGW_BUCKET:-fencepost}
region=us-east-1

. "$(dirname "$0")/lib.sh"

# Prints the daemons' logs (their last 60 lines) to stderr.
print_logs() {
  local f
  for f in "$dir"/log/*.log "$dir"/log/*.out; do
    [[ -s $f ]] || continue
    echo "--- $f (last 60 lines) ---" >&2
    tail -n 60 "$f" >&2
  done
}

# fail MESSAGE: the logs, the daemons stopped, then die.
fail() {
  print_logs
  stop_daemons
  die "$*"
}

remaining_s() {
  echo $((deadline - SECONDS))
}

# The ceph CLI against this cluster, bounded.
cephc() {
  timeout 20 ceph -c "$dir/ceph.conf" --connect-timeout 10 "$@"
}

write_config() {
  local fsid=$1 mon_port=$2 rgw_port=$3
  cat >"$dir/ceph.conf" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
ms client mode = crc
keyring = $dir/keyring
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = true
mon cluster log file = $dir/log/cluster.log
crash dir = $dir/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
paxos propose interval = 0.05

[mon]
mon data = $dir/mon/\$id
mon initial members = a

[osd]
osd data = $dir/osd/\$id
osd objectstore = memstore
memstore device bytes = 4294967296
osd crush update on start = false
osd op num shards = 1
osd op num threads per shard = 2

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw data = $dir/rgw
rgw thread pool size = 64
rgw enable usage log = false
rgw enable ops log = false
rgw dynamic resharding = false
CONF
}

# start_daemon NAME CMD...: runs CMD in the foreground of a background
# process, its pid in DIR/run/NAME.daemon, its output in DIR/log/NAME.out.
start_daemon() {
  local name=$1
  shift
  "$@" -f </dev/null >>"$dir/log/$name.out" 2>&1 &
  echo $! >"$dir/run/$name.daemon"
}

alive() {
  [[ -f $dir/run/$1.daemon ]] && running "$(<"$dir/run/$1.daemon")"
}

# Whether process PID exists and is not a zombie.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}

# The start time of process PID (field 22 of /proc/PID/stat), so that a
# new process given the same pid is not taken for it; fails for a zombie
# (it has ended; its parent may be slow to reap it).
start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]] || return 1
  set -- $stat
  echo "${20}"
}

# Starts the watcher of OWNER_PID (see the usage above), detached from the
# caller's session and output, so that it outlives the owner.
start_reaper() {
  local owner=$1 started
  started=$(start_time "$owner") || die "no process $owner"
  setsid "$script" reap "$dir" "$owner" "$started" </dev/null >/dev/null 2>&1 &
}

# reap: the watcher. Ends when DIR is gone (stopped by its owner).
reap() {
  local owner=$1 started=$2
  echo $$ >"$dir/reaper.pid"
  while [[ -d $dir ]]; do
    if [[ $(start_time "$owner") != "$started" ]]; then
      stop_daemons || true
      rm -rf "$dir"
      return 0
    fi
    sleep 1
  done
}

# Stops the watcher, unless this is it.
stop_reaper() {
  local pid
  [[ -f $dir/reaper.pid ]] || return 0
  pid=$(<"$dir/reaper.pid")
  [[ $pid == "$$" ]] || kill "$pid" 2>/dev/null || true
}

# Waits for CHECK (a command) to succeed, while daemon NAME runs.
wait_for() {
  local what=$1 name=$2
  shift 2
  while ! "$@" >/dev/null 2>&1; do
    alive "$name" || return 2
    ((SECONDS < deadline)) || fail "$what: not within ${start_timeout_s}s"
    sleep 0.2
  done
}

mon_in_use() {
  grep -qs 'Address already in use\|unable to bind' "$dir/log/mon.a.log" "$dir/log/mon.out"
}

rgw_in_use() {
  grep -qs 'Address already in use\|failed to bind' "$dir/log/client.rgw.log" "$dir/log/rgw.out"
}

# Makes and starts the monitor on a free port; returns 1 when the port was
# taken meanwhile.
start_mon() {
  local fsid=$1 port=$2 rc=0
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" \
    "$dir/monmap" >"$dir/log/monmaptool.out" 2>&1 || fail "monmaptool failed"
  ceph-mon -c "$dir/ceph.conf" -i a --mkfs --monmap "$dir/monmap" \
    >"$dir/log/mon-mkfs.out" 2>&1 || fail "ceph-mon --mkfs failed"
  start_daemon mon ceph-mon -c "$dir/ceph.conf" -i a
  wait_for "the monitor did not answer" mon cephc mon stat || rc=$?
  if ((rc != 0)); then
    mon_in_use && return 1
    fail "the monitor exited while starting"
  fi
}

# Makes the OSD (its own uuid, placed in the CRUSH map by hand), starts it
# and waits until the monitor counts it up.
start_osd() {
  local uuid id
  uuid=$(</proc/sys/kernel/random/uuid)
  id=$(cephc osd create "$uuid") || fail "ceph osd create failed"
  [[ $id == 0 ]] || fail "the OSD got id '$id', not 0"
  mkdir -p "$dir/osd/0"
  ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs --osd-uuid "$uuid" \
    >"$dir/log/osd-mkfs.out" 2>&1 || fail "ceph-osd --mkfs failed"
  cephc osd crush add osd.0 1.0 root=default >/dev/null 2>&1 ||
    fail "ceph osd crush add failed"
  start_daemon osd ceph-osd -c "$dir/ceph.conf" -i 0
  wait_for "the OSD did not come up" osd osd_up ||
    fail "the OSD exited while starting"
}

osd_up() {
  cephc osd stat -f json | grep -q '"num_up_osds":1'
}

rgw_answers() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$1/") &&
    [[ $code == 200 || $code == 403 ]]
}

# Starts radosgw on a free port; returns 1 when the port was taken.
start_rgw() {
  local port=$1 rc=0
  start_daemon rgw radosgw -c "$dir/ceph.conf" -n client.rgw
  wait_for "radosgw did not answer on port $port" rgw rgw_answers "$port" || rc=$?
  if ((rc != 0)); then
    rgw_in_use && return 1
    fail "radosgw exited while starting"
  fi
}

# The S3 user (a fresh key pair) and the bucket.
make_user_and_bucket() {
  local port=$1 access secret code
  access=$(head -c 15 /dev/urandom | base32 | tr -d '=')
  secret=$(head -c 30 /dev/urandom | base64 | tr -d '=+/')
  timeout 60 radosgw-admin -c "$dir/ceph.conf" -n client.rgw user create \
    --uid fencepost --display-name fencepost \
    --access-key "$access" --secret-key "$secret" \
    >"$dir/log/user-create.out" 2>&1 || fail "radosgw-admin user create failed"
  # curl signs the request but sends no x-amz-content-sha256, which RGW
  # needs (SignatureDoesNotMatch without it).
  code=$(curl -s -o "$dir/log/create-bucket.out" -w '%{http_code}' --max-time 20 \
    --aws-sigv4 "aws:amz:$region:s3" --user "$access:$secret" \
    -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    -X PUT "http://127.0.0.1:$port/$bucket") || code=curl-failed
  [[ $code == 200 ]] || fail "creating bucket $bucket answered $code"
  cat >"$dir/env" <<ENV
S3_ENDPOINT=http://127.0.0.1:$port
S3_REGION=$region
S3_BUCKET=$bucket
AWS_ACCESS_KEY_ID=$access
AWS_SECRET_ACCESS_KEY=$secret
CEPH_CONF=$dir/ceph.conf
ENV
}

# Kills the three daemons at once and waits for them. Nothing of the
# cluster is kept, so nothing is gained by TERM, which costs seconds: each
# daemon takes about 2 s to exit, and a radosgw whose OSD left first waits
# up to 120 s for it.
stop_daemons() {
  local name pid pids=() i
  for name in rgw osd mon; do
    [[ -f $dir/run/$name.daemon ]] || continue
    pid=$(<"$dir/run/$name.daemon")
    kill -KILL "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$dir/run/$name.daemon"
  done
  for ((i = 0; i < 100; i++)); do
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && break
    done
    kill -0 "${pid:-}" 2>/dev/null || return 0
    sleep 0.05
  done
  echo "${0##*/}: processes ${pids[*]} did not exit" >&2
  return 1
}

# One attempt from nothing; 1 when a port turned out to be taken.
try_start() {
  local fsid mon_port rgw_port
  stop_daemons
  rm -rf "$dir/mon" "$dir/osd" "$dir/rgw" "$dir/run" "$dir/log" "$dir/env"
  mkdir -p "$dir/mon/a" "$dir/osd" "$dir/rgw" "$dir/run" "$dir/log" "$dir/crash"
  fsid=$(</proc/sys/kernel/random/uuid)
  mon_port=$(free_port) || exit 1
  rgw_port=$(free_port) || exit 1
  write_config "$fsid" "$mon_port" "$rgw_port"
  start_mon "$fsid" "$mon_port" || return 1
  start_osd
  start_rgw "$rgw_port" || return 1
  make_user_and_bucket "$rgw_port"
}

# gateway-stop: radosgw killed (a crash, and quick: a TERM'd radosgw takes
# seconds), waited for at most 10 s.
gateway_stop() {
  local pid i
  [[ -f $dir/run/rgw.daemon ]] || die "no radosgw was started in $dir"
  pid=$(<"$dir/run/rgw.daemon")
  kill -CONT "$pid" 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    running "$pid" || return 0
    sleep 0.05
  done
  die "radosgw ($pid) did not exit within 10 s"
}

# gateway-start: radosgw again on the port of DIR/env. Its port stays
# claimed (free_port's claim renewed), so no other test is handed it.
gateway_start() {
  local port
  [[ -f $dir/env ]] || die "no cluster in $dir"
  alive rgw && die "radosgw already runs in $dir"
  alive osd && alive mon || die "the cluster of $dir is not running"
  port=$(sed -n 's|^S3_ENDPOINT=http://127.0.0.1:||p' "$dir/env")
  [[ -n $port ]] || die "no port in $dir/env"
  mkdir -p "$free_port_claims/$port" && touch "$free_port_claims/$port"
  deadline=$((SECONDS + start_timeout_s))
  start_daemon rgw radosgw -c "$dir/ceph.conf" -n client.rgw
  while ! rgw_answers "$port"; do
    if ! alive rgw || ((SECONDS >= deadline)); then
      print_logs
      kill -KILL "$(<"$dir/run/rgw.daemon")" 2>/dev/null || true
      die "radosgw did not answer again on port $port"
    fi
    sleep 0.1
  done
}

script=$(cd "$(dirname "$0")" && pwd)/${0##*/}
cmd=${1:-}
dir=${2:-}
[[ -n $cmd && -n $dir ]] ||
  die "usage: rgw.sh start DIR [OWNER_PID] | stop DIR | gateway-stop DIR | gateway-start DIR | gateway-pid DIR"
case $cmd in
  start)
    for p in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool curl setsid; do
      command -v "$p" >/dev/null || die "$p not found (scripts/deps.sh installs it)"
    done
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    alive mon 2>/dev/null && die "a cluster already runs in $dir"
    [[ -z ${3:-} ]] || start_reaper "$3"
    deadline=$((SECONDS + start_timeout_s))
    for _ in 1 2 3; do
      if try_start; then
        cat "$dir/env"
        exit 0
      fi
    done
    fail "ports taken three times"
    ;;
  stop)
    [[ -d $dir ]] || exit 0
    dir=$(cd "$dir" && pwd)
    stop_reaper
    stop_daemons
    rm -rf "$dir"
    ;;
  gateway-stop)
    dir=$(cd "$dir" && pwd)
    gateway_stop
    ;;
  gateway-start)
    dir=$(cd "$dir" && pwd)
    gateway_start
    ;;
  gateway-pid)
    dir=$(cd "$dir" && pwd)
    alive rgw || exit 1
    cat "$dir/run/rgw.daemon"
    ;;
  reap) # internal: the watcher started by `start DIR OWNER_PID`
    reap "$3" "$4"
    ;;
  *) die "unknown command '$cmd' (start, stop, gateway-stop, gateway-start, gateway-pid)" ;;
esac
