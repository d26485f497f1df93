#!/usr/bin/env bash
# A rollback to the last release before data format versions (commit
# 0302d03) must not serve a directory this release has written: that
# release cannot see fences kept in value records (data format 3) and would
# read them lower than the tokens they reached. It must refuse to start
# (exit 2), on one shard and on four, and this release must then serve the
# directory as before, with every fence where it was.
#
#   tests/e2e/rollback.sh FENCEPOST CACHE_DIR
#
# The old release is built once from its commit (git archive of this
# repository's history) into CACHE_DIR, at -O0 and without its tests: about
# three minutes of one core.
set -euo pipefail
new=$1
cache=$2
commit=${FENCEPOST_ROLLBACK_COMMIT:-0302d036c706e153e80945af6e5663c705fa82ac}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
old=$cache/build/proxy/fencepost

die() {
  echo "FAIL: $*" >&2
  exit 1
}

build_old() {
  mkdir -p "$cache"
  exec 9>"$cache.lock"
  flock 9
  [ -x "$old" ] && return 0
  rm -rf "$cache/src" "$cache/build"
  mkdir -p "$cache/src"
  git -C "$source_dir" archive "$commit" | tar -x -C "$cache/src"
  cmake -S "$cache/src" -B "$cache/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE=-O0 -DFENCEPOST_BUILD_TESTS=OFF >"$cache/build.log" 2>&1 ||
    { tail -40 "$cache/build.log"; die "cannot configure $commit"; }
  nice -n 5 cmake --build "$cache/build" --target fencepost >>"$cache/build.log" 2>&1 ||
    { tail -40 "$cache/build.log"; die "cannot build $commit"; }
}

work=$(mktemp -d)
pid=""
cleanup() {
  [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# serve BINARY DIR LOG [ARGS...]: starts it in the background (pid in $pid)
# and waits at most 30 s for it to listen (returns 0, ports in $data and
# $admin) or to exit (returns 1, its status in $status).
serve() {
  local binary=$1 dir=$2 log=$3
  shift 3
  "$binary" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --data-dir "$dir" "$@" >"$log" 2>&1 &
  pid=$!
  local line=""
  for _ in $(seq 1 3000); do
    line=$(grep -m1 ' listening \(data=\|event=started\)' "$log" || true)
    if [ -n "$line" ]; then
      data=$(sed -n 's/.* data=\([^ ]*\) .*/\1/p' <<<"$line")
      admin=$(sed -n 's/.* admin=\([^ ]*\) .*/\1/p' <<<"$line")
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      status=0
      wait "$pid" || status=$?
      pid=""
      return 1
    fi
    sleep 0.01
  done
  cat "$log" >&2
  die "$binary neither listened nor exited within 30 s"
}

stop() {
  kill -TERM "$pid"
  local status=0
  wait "$pid" || status=$?
  pid=""
  [ "$status" -eq 0 ] || die "fencepost exited $status on SIGTERM"
}

token_of() { # FENCE
  curl -sf "http://$admin/v1/fences/$1" | sed -n 's/.*"token":\([0-9]*\).*/\1/p'
}

build_old
for shards in 1 4; do
  dir=$work/data-$shards
  serve "$new" "$dir" "$work/new-$shards.log" --lmdb-shards "$shards" ||
    { cat "$work/new-$shards.log" >&2; die "this release did not start"; }
  # Each key written twice: from the second write on, the key's value
  # record keeps its fence (format 3), above the fences database's.
  for key in k1 k2 k3 k4 k5 k6; do
    for token in 5 10; do
      code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT \
        -H "Fencing-Token: $token" --data "v$token" "http://$data/$key")
      case $code in 200 | 201) ;; *) die "PUT $key with $token: $code" ;; esac
    done
  done
  stop
  if serve "$old" "$dir" "$work/old-$shards.log"; then
    seen=$(token_of k1 || true)
    stop || true
    cat "$work/old-$shards.log" >&2
    die "the release $commit served a directory of this release ($shards shards): the fence k1, at 10, read '$seen' there"
  fi
  [ "$status" -eq 2 ] ||
    { cat "$work/old-$shards.log" >&2; die "the release $commit exited $status, not 2"; }
  grep -q 'shard count' "$work/old-$shards.log" ||
    { cat "$work/old-$shards.log" >&2; die "the refusal does not say why"; }
  # The negative control: the same directory with the count as the
  # releases before this one left it is served by that release, which then
  # reads the fences kept in value records lower than they are.
  cp -a "$dir" "$work/control-$shards"
  echo "$shards" >"$work/control-$shards/shards"
  serve "$old" "$work/control-$shards" "$work/control-$shards.log" ||
    { cat "$work/control-$shards.log" >&2; die "the negative control: the release $commit did not start (exit $status)"; }
  seen=$(token_of k1)
  stop
  [ "${seen:-0}" -lt 10 ] ||
    die "the negative control: the release $commit read the fence k1 at $seen, not below 10"
  serve "$new" "$dir" "$work/again-$shards.log" ||
    { cat "$work/again-$shards.log" >&2; die "this release did not start again"; }
  for key in k1 k2 k3 k4 k5 k6; do
    [ "$(token_of "$key")" = 10 ] || die "the fence $key is not at 10 after the refused rollback"
  done
  stop
  echo "$shards shard(s): the release $commit refused the directory (exit 2); every fence stands at 10 (with the old count file it read k1 at ${seen:-none})"
done
