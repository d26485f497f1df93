#!/usr/bin/env bash
# How much of fencepost one write crosses: a plain PUT on the data port (the
# embedded LMDB default) and a fenced PutObject through the S3 front door to
# a real Ceph RGW (s3://), each run once under callgrind after a warm-up.
# Counted: fencepost's own functions (namespace fencepost) that ran between
# zeroing the counters just before the request and the dump just after it,
# the threads that ran any of them, and, for a build with debug information
# (-g), the files they are in (0 without). Functions the compiler inlined
# are not seen, so compare builds of the same flags only.
#
#   tests/bench/put_path.sh BUILD_DIR   # a build with symbols (RelWithDebInfo)
#
# Prints one line per request: `put_path request=plain functions=N
# threads=N files=N own_functions=N own_files=N answering_thread=N` (and
# `request=s3-door`), then the files of each. functions counts every
# symbol that names fencepost (template instances of the standard library
# and Boost over its types, each coroutine's frames, overloads apart);
# own_functions only the project's own functions by qualified name
# (fencepost::..., overloads and coroutine frames as one), own_files only
# the project's files, and answering_thread the own functions of the thread
# that read and answered the request (not the applier's, which writes LMDB
# after the answer).
# PUT_PATH_NAMES=PREFIX keeps each request's function names in
# PREFIX.plain and PREFIX.s3-door. Needs valgrind (callgrind_control), Debian's python3-boto3 and the Ceph
# packages of scripts/deps.sh; starts and stops everything it uses on
# 127.0.0.1 in a temporary directory.
set -euo pipefail
case ${1:-} in -h | --help | "") sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
BUILD=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.."
# shellcheck source=tests/bench/common.sh
source tests/bench/common.sh

WORK=$(mktemp -d /tmp/fencepost-putpath.XXXXXX)
FP_PID=""
cleanup() {
  [[ -n $FP_PID ]] && kill "$FP_PID" 2>/dev/null && wait "$FP_PID" 2>/dev/null
  tests/coordination/rgw.sh stop "$WORK/rgw" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
cp "$BUILD/proxy/fencepost" "$WORK/fencepost"

wait_for() {  # command... : retries for up to 60 s (valgrind is slow)
  for _ in $(seq 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}

# serve NAME ARGS...: fencepost under callgrind on PORT, ready.
serve() {
  local name=$1
  shift
  PORT=$(free_port) ADMIN=$(free_port)
  mkdir -p "$WORK/$name"
  valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$WORK/$name/cg.out" \
    "$WORK/fencepost" serve --data-dir "$WORK/$name/data" \
    --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN" \
    --log-level warn "$@" >"$WORK/$name/log" 2>&1 &
  FP_PID=$!
  wait_for curl -fsS "http://127.0.0.1:$ADMIN/readyz" ||
    { cat "$WORK/$name/log" >&2; exit 1; }
}

zero() { callgrind_control -z "$FP_PID" >/dev/null; }
dump() { callgrind_control -d "$FP_PID" >/dev/null; }

PROJECT_FOLDERS="codec|http|sigv4|s3|fence|metrics|storage|proxy|cli|client"

# own_names: of callgrind_annotate's "FILE:FUNCTION" lines, the project's
# own functions by qualified name (fencepost::..., before the parameter
# list; a coroutine's frames and a function's overloads are one), one each.
own_names() {
  sed -E 's/^[^:]*://; s/ \[clone [^]]*\]//g' |
    grep -E '^fencepost::' | sed -E 's/\(.*//' | sort -u
}

# count NAME: stops fencepost, prints the counts of its dump and the files.
count() {
  local name=$1
  kill "$FP_PID"
  wait "$FP_PID" 2>/dev/null || true
  FP_PID=""
  local threads=0 dump answering=0
  : >"$WORK/$name/functions"
  # The dumps the request's -d made (cg.out.1-NN, one per thread); a line
  # per function: "IR (PCT) FILE:FUNCTION", FILE ??? without debug info.
  for dump in "$WORK/$name"/cg.out.1-*; do
    callgrind_annotate --threshold=100 "$dump" 2>/dev/null |
      sed -nE 's/^ *[0-9,]+ +(\([^)]*\) +)?//p' |
      grep -E ':(fencepost::|[^:]*fencepost::)' >"$WORK/$name/thread" || true
    [[ -s $WORK/$name/thread ]] && threads=$((threads + 1))
    if grep -q 'fencepost::proxy::Server::' "$WORK/$name/thread"; then
      answering=$(own_names <"$WORK/$name/thread" | wc -l)
    fi
    cat "$WORK/$name/thread" >>"$WORK/$name/functions"
  done
  sort -u "$WORK/$name/functions" -o "$WORK/$name/functions"
  sed -E 's/^[^:]*://' "$WORK/$name/functions" | sort -u >"$WORK/$name/names"
  local files
  files=$(sed -nE 's|^.*/([^/]+/[^/:]+\.(cc\|h)):.*|\1|p' "$WORK/$name/functions" | sort -u)
  local own_files
  own_files=$(grep -cE "^($PROJECT_FOLDERS)/" <<<"$files" || true)
  echo "put_path request=$name functions=$(wc -l <"$WORK/$name/names")" \
    "threads=$threads files=$(grep -c . <<<"$files" || true)" \
    "own_functions=$(own_names <"$WORK/$name/functions" | wc -l)" \
    "own_files=$own_files answering_thread=$answering"
  sed 's/^/  /' <<<"$files"
  # PUT_PATH_NAMES=PREFIX keeps the function names in PREFIX.NAME.
  if [[ -n ${PUT_PATH_NAMES:-} ]]; then
    cp "$WORK/$name/names" "$PUT_PATH_NAMES.$name"
  fi
}

put() { curl -fsS -X PUT -H "Fencing-Token: $2" --data-binary v "http://127.0.0.1:$PORT/$1"; }
serve plain
put warm/1 5 && put warm/2 5
zero
put path/k 5
dump
count plain

printf '== starting Ceph RGW\n' >&2
tests/coordination/rgw.sh start "$WORK/rgw" $$ >/dev/null
set -a
# shellcheck disable=SC1091
. "$WORK/rgw/env"
set +a
DOOR_ID=path-client
DOOR_SECRET=$(head -c 30 /dev/urandom | base64 | tr -d '+/=' | head -c 40)
echo "$DOOR_ID $DOOR_SECRET" >"$WORK/door-keys"
chmod 600 "$WORK/door-keys"
S3_PORT=$(free_port)
serve s3-door --backend "s3://$S3_BUCKET" --s3-endpoint "$S3_ENDPOINT" \
  --s3-region "$S3_REGION" --s3-listen "127.0.0.1:$S3_PORT" \
  --s3-client-credentials "$WORK/door-keys"
# Two warm-up PutObjects, then the counted one between zero and dump (the
# client made before, so that only the request falls between them).
AWS_ACCESS_KEY_ID=$DOOR_ID AWS_SECRET_ACCESS_KEY=$DOOR_SECRET \
  /usr/bin/python3 - "http://127.0.0.1:$S3_PORT" "$S3_BUCKET" "$FP_PID" <<'EOF'
import subprocess
import sys
import boto3
endpoint, bucket, pid = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
def put(key):
    s3.put_object(Bucket=bucket, Key=key, Body=b"v",
                  Metadata={"fencing-token": "5"})
put("warm/1")
put("warm/2")
subprocess.run(["callgrind_control", "-z", pid], check=True,
               stdout=subprocess.DEVNULL)
put("path/k")
subprocess.run(["callgrind_control", "-d", pid], check=True,
               stdout=subprocess.DEVNULL)
EOF
count s3-door
