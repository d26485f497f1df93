#!/usr/bin/env bash
# The four S3 clients of docs/s3.md's "S3 clients unchanged", Debian's
# (python3-boto3 1.26, s3cmd 2.3, rclone 1.60, awscli 2.9), against
# fencepost's S3 front door in front of a real Ceph RGW (rgw.sh), exactly
# as the section writes them:
#  - each block after a marker <!-- tests/coordination/s3_clients.sh writes
#    the next block to NAME --> is written to NAME in the clients' working
#    directory;
#  - the block after <!-- tests/coordination/s3_clients.sh serves with the
#    next block --> ends with the `fencepost serve` line: its lines before
#    it run first (in the clients' directory), then fencepost runs with its
#    flags (the front door on a free port instead of 7402);
#  - each console block after <!-- tests/coordination/s3_clients.sh runs
#    the next console block -->: every `$ COMMAND` runs in one shell
#    session per block (what a command exports holds for the next), in a
#    clean environment (HOME empty, PATH /usr/bin:/bin: Debian's python3
#    and aws, none of the store's credentials), each under `timeout 60`,
#    and must exit 0 (a refusal is shown as `; echo "exit status $?"`); its
#    output (standard output and error) must be the lines shown, a line
#    `...` standing for any lines, after times, request ids, s3cmd's rates
#    and leading blanks are made comparable.
# After each write (a command with a fencing token and a destination
# s3://fencepost/KEY or door:fencepost/KEY, or leader.py) the object
# PREFIX/KEY is read straight from RGW with an independent client
# (s3_object.py, with the store's credentials): it must hold the bytes and
# the x-amz-meta-fencing-token of the last write the transcript shows
# accepted, so a refused write must have changed nothing. After each
# DeleteObjects of cleanup.py, every key it names is read the same way:
# a key the command refused must still hold that write, a deleted one be
# gone.
# Then README.md's boto3 block (after <!-- tests/coordination/s3_clients.sh
# runs the next python block -->) runs against a second fencepost (its own
# fences, the prefix readme): the first write lands, the second ends the
# script with the error its last line (a comment) shows.
# Last, boto3 virtual-hosted (s3_hosted.py: addressing_style virtual, and
# presigned URLs, for fencepost.localhost) against a third fencepost serving
# the section's flags with --s3-listen-domain localhost (the prefix hosted):
# its output must be the lines below, and RGW must hold its last write.
#
#   FENCEPOST=build/proxy/fencepost tests/coordination/s3_clients.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
fencepost=$(realpath "${FENCEPOST:?FENCEPOST: the fencepost binary}")
marker='tests/coordination/s3_clients.sh'
door_address=127.0.0.1:7402

work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-s3-clients.XXXXXX")
run=$work/run # the clients' working directory
mkdir -p "$run" "$work/home" "$work/blocks"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  "$here/rgw.sh" stop "$work/rgw" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "${0##*/}: $*" >&2
  exit 1
}

# The servers start with their defaults, whatever the caller's settings.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^FENCEPOST_' || true)

# The section's marked blocks, in order: blocks/N.ACTION[.NAME] and a line
# "N ACTION NAME" of blocks/index each.
awk -v dir="$work/blocks" -v m="$marker" '
  /^## / { inside_section = ($0 == "## S3 clients unchanged") }
  !inside_section { next }
  index($0, "<!-- " m " ") == 1 {
    action = ""; name = "-"
    if ($0 ~ / writes the next block to /) {
      action = "write"; name = $0
      sub(/.* writes the next block to /, "", name); sub(/ -->$/, "", name)
    } else if ($0 ~ / serves with the next block -->$/) {
      action = "serve"
    } else if ($0 ~ / runs the next console block -->$/) {
      action = "console"
    } else {
      print "unknown marker: " $0 > "/dev/stderr"; exit 1
    }
    next
  }
  /^```/ && !open && action != "" {
    open = 1; ++n; file = dir "/" n
    print n, action, name >> (dir "/index")
    printf "" > file
    next
  }
  /^```/ && open { open = 0; action = ""; close(file); next }
  open { print >> file }
' "$root/docs/s3.md"
[[ -s $work/blocks/index ]] || fail "docs/s3.md has no marked blocks in \"S3 clients unchanged\""

# The store.
"$here/rgw.sh" start "$work/rgw" "$$" >"$work/rgw.log" 2>&1 ||
  { cat "$work/rgw.log" >&2; fail "the RGW did not start"; }
set -a
. "$work/rgw/env"
set +a

# serve LOG DATA_DIR FLAG...: fencepost in the clients' directory, its
# front door's address in $door.
serve() {
  local log=$1 data_dir=$2 line=
  shift 2
  (cd "$run" && exec "$fencepost" serve --listen 127.0.0.1:0 \
    --admin-listen 127.0.0.1:0 --data-dir "$data_dir" "$@" >"$log" 2>&1) &
  pids+=($!)
  door=
  for _ in $(seq 300); do
    line=$(grep -m1 'event=s3_started' "$log" 2>/dev/null || true)
    door=$(sed -nE 's/.* s3=([^ ]+).*/\1/p' <<<"$line")
    [[ -n $door ]] && grep -q 'event=started' "$log" && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log" >&2
  fail "fencepost did not start with $*"
}

# Times, request ids, rates and leading blanks made comparable; carriage
# returns and trailing blanks dropped.
normalise() {
  tr -d '\r' | sed -E \
    -e 's|^[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}|<time>|' \
    -e 's/request id: [0-9a-f]+/request id: <id>/g' \
    -e 's/\(([0-9]+) bytes in [0-9.]+ seconds, [0-9.]+ [kMG]?B\/s\)/(\1 bytes in <time>)/' \
    -e 's/^[[:space:]]+//' -e 's/[[:space:]]+$//' |
    sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'
}

# matches EXPECTED ACTUAL: whether ACTUAL's lines are EXPECTED's, where a
# line "..." of EXPECTED stands for any number of lines.
matches() {
  awk 'FNR == NR { e[++n] = $0; next } { a[++m] = $0 }
    END {
      j = 1
      for (i = 1; i <= n; i++) {
        if (e[i] == "...") {
          if (i == n) exit 0
          while (j <= m && a[j] != e[i + 1]) j++
          continue
        }
        if (j > m || a[j] != e[i]) exit 1
        j++
      }
      exit (j == m + 1) ? 0 : 1
    }' "$1" "$2"
}

# client CMD OUT: CMD as a user types it, in the clients' directory with a
# clean environment (plus what earlier commands of the block exported),
# bounded; its output in OUT, its exit status returned.
client() {
  (cd "$run" && exec env -i HOME="$work/home" PATH=/usr/bin:/bin \
    LANG=C.UTF-8 timeout 60 bash -c \
    '. ./.session; eval "$1"; status=$?; export -p >./.session; exit $status' \
    _ "$1" >"$2" 2>&1)
}

# What the store must hold: key -> "FILE TOKEN", FILE in the clients'
# directory holding the bytes.
declare -A holds=()
# Writes whose key, bytes and token the command line does not show.
declare -A declared=(["python3 leader.py"]="orders/1 b.txt 34"
  ["python3 presign.py"]="orders/5 b.txt 34")
# The keys of a DeleteObjects the command line does not show, each KEY:kept
# (it holds the last write accepted) or KEY:gone (no object) after it.
declare -A deletes=(
  ["python3 cleanup.py 33"]="orders/1:kept orders/9:gone"
  ["python3 cleanup.py 34"]="orders/1:gone orders/9:gone")
deletes_checked=0
token_re='[Ff]encing-[Tt]oken[:=] ?([0-9]+)'
destination_re=' ([^ ]+) (s3://|door:)fencepost/([^ ;]+)'

# is_write CMD: sets w_key, w_file and w_token when CMD writes an object.
is_write() {
  if [[ -n ${declared[$1]:-} ]]; then
    read -r w_key w_file w_token <<<"${declared[$1]}"
    return 0
  fi
  [[ $1 =~ $token_re ]] || return 1
  w_token=${BASH_REMATCH[1]}
  [[ $1 =~ $destination_re ]] || return 1
  w_file=${BASH_REMATCH[1]} w_key=${BASH_REMATCH[3]}
}

# check_object OBJECT_KEY FILE TOKEN: the store holds FILE's bytes at
# OBJECT_KEY with TOKEN in x-amz-meta-fencing-token (read with the store's
# own credentials, straight from RGW).
check_object() {
  local got
  got=$(timeout 60 /usr/bin/python3 "$here/s3_object.py" get "$1") ||
    fail "reading $1 from RGW failed: $got"
  /usr/bin/python3 - "$got" "$run/$2" "$3" "$1" <<'PY' || fail "after: $cmd"
import base64, json, sys
got, path, token, key = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
want = open(path, "rb").read()
body = base64.b64decode(got.get("body_b64", ""))
problems = []
if got["status"] != 200:
    problems.append("status %s %s" % (got["status"], got.get("error", "")))
if body != want:
    problems.append("bytes %r, not %r" % (body, want))
if got.get("metadata", {}).get("fencing-token") != token:
    problems.append("metadata %s, not fencing-token %s" % (got.get("metadata"), token))
if problems:
    print("RGW's object %s: %s" % (key, "; ".join(problems)), file=sys.stderr)
    sys.exit(1)
PY
}

# check_gone OBJECT_KEY: the store has no object at OBJECT_KEY.
check_gone() {
  local got
  got=$(timeout 60 /usr/bin/python3 "$here/s3_object.py" head "$1") ||
    fail "reading $1 from RGW failed: $got"
  /usr/bin/python3 -c 'import json, sys; sys.exit(json.loads(sys.argv[1])["status"] != 404)' "$got" ||
    fail "after: $cmd: RGW still has $1 ($got)"
}

# check_deletes KEY:kept|KEY:gone...: what a DeleteObjects left.
check_deletes() {
  local entry key
  for entry in "$@"; do
    key=${entry%:*}
    if [[ ${entry##*:} == gone ]]; then
      check_gone "$prefix/$key"
      echo "ok: RGW has no $prefix/$key"
    else
      [[ -n ${holds[$key]:-} ]] || fail "no write of $key was accepted before: $cmd"
      read -r w_file w_token <<<"${holds[$key]}"
      check_object "$prefix/$key" "$w_file" "$w_token"
      echo "ok: RGW still holds $prefix/$key: $w_file's bytes, fencing-token $w_token"
    fi
  done
}

# run_console FILE: each command of a console block, compared and checked.
run_console() {
  local block=$1 n status
  rm -f "$block".*.cmd "$block".*.expected
  awk -v out="$block" '
    /^\$ / { ++n; sub(/^\$ /, ""); print > (out "." n ".cmd"); next }
    n { print > (out "." n ".expected") }
  ' "$block"
  : >"$run/.session"
  for ((n = 1; ; n++)); do
    [[ -e $block.$n.cmd ]] || break
    cmd=$(<"$block.$n.cmd")
    touch "$block.$n.expected"
    status=0
    client "${cmd//$door_address/$door}" "$block.$n.actual" || status=$?
    normalise <"$block.$n.expected" >"$block.$n.want"
    normalise <"$block.$n.actual" >"$block.$n.got"
    if [[ $status != 0 ]] || ! matches "$block.$n.want" "$block.$n.got"; then
      echo "--- \$ $cmd: exit status $status; its output (- docs/s3.md, + this run):" >&2
      diff -u "$block.$n.want" "$block.$n.got" | tail -n +3 >&2 || true
      fail "docs/s3.md's \`$cmd\` did not do what the docs show"
    fi
    echo "ok: $cmd"
    if is_write "$cmd"; then
      # The command line's write was refused when the transcript says
      # so; a declared command's last write is the one it names.
      if [[ -n ${declared[$cmd]:-} ]] || ! grep -q StaleFencingToken "$block.$n.want"; then
        holds[$w_key]="$w_file $w_token"
      fi
      [[ -n ${holds[$w_key]:-} ]] || fail "no write of $w_key was accepted before: $cmd"
      read -r w_file w_token <<<"${holds[$w_key]}"
      check_object "$prefix/$w_key" "$w_file" "$w_token"
      echo "ok: RGW holds $prefix/$w_key: $w_file's bytes, fencing-token $w_token"
    fi
    if [[ -n ${deletes[$cmd]:-} ]]; then
      # shellcheck disable=SC2086 # the entries are words
      check_deletes ${deletes[$cmd]}
      deletes_checked=$((deletes_checked + 1))
    fi
  done
}

door=
prefix=
serve_flags=()
while read -r n action name; do
  block=$work/blocks/$n
  case $action in
    write)
      sed "s/$door_address/${door:-$door_address}/g" "$block" >"$run/$name"
      ;;
    serve)
      # Lines before the last (chmod, say) run first in the clients' directory.
      line=$(tail -n 1 "$block")
      if (($(wc -l <"$block") > 1)); then
        (cd "$run" && bash -euo pipefail -c "$(head -n -1 "$block")") ||
          fail "the serve block's first lines failed"
      fi
      [[ $line == 'fencepost serve '* ]] || fail "the serve block does not end with a \`fencepost serve\` line: $line"
      eval "serve_flags=(${line#fencepost serve })"
      prefix=$(sed -nE 's|.*--backend s3://fencepost/([^ ]+).*|\1|p' <<<"$line")
      [[ -n $prefix ]] || fail "the serve line has no --backend s3://fencepost/PREFIX"
      serve "$work/fencepost.log" "$work/data" "${serve_flags[@]//$door_address/127.0.0.1:0}"
      ;;
    console)
      [[ -n $door ]] || fail "a console block comes before the serve block"
      run_console "$block"
      ;;
  esac
done <"$work/blocks/index"
((${#holds[@]} == 5)) || fail "the section wrote ${#holds[@]} keys, not one per client and one through presigned URLs (5)"
((deletes_checked == ${#deletes[@]})) || fail "the section ran $deletes_checked of cleanup.py's ${#deletes[@]} DeleteObjects"

# README.md's boto3 block, against a fencepost of its own.
awk -v m="<!-- $marker runs the next python block -->" '
  $0 == m { armed = 1; next }
  armed && /^```python$/ { inside = 1; next }
  inside && /^```/ { exit }
  inside { print }
' "$root/README.md" >"$work/readme.py"
[[ -s $work/readme.py ]] || fail "README.md has no python block after its marker"
# serve_beside NAME FLAG...: a fencepost of its own (data directory, log,
# the prefix NAME, a free door port) with the section's flags and FLAGs.
serve_beside() {
  local name=$1 flag flags=()
  shift
  for flag in "${serve_flags[@]}"; do
    case $flag in
      s3://fencepost/*) flags+=("s3://fencepost/$name") ;;
      "$door_address") flags+=(127.0.0.1:0) ;;
      *) flags+=("$flag") ;;
    esac
  done
  serve "$work/fencepost-$name.log" "$work/data-$name" "${flags[@]}" "$@"
}
serve_beside readme
sed "s/$door_address/$door/g" "$work/readme.py" >"$run/readme.py"
want=$(tail -n 1 "$work/readme.py")
want=${want#\# }
cmd="python3 readme.py"
status=0
client "$cmd" "$work/readme.out" || status=$?
[[ $status == 1 && $(tail -n 1 "$work/readme.out") == "$want" ]] || {
  cat "$work/readme.out" >&2
  fail "README.md's boto3 block exited $status, its last line not '$want'"
}
check_object readme/orders/1 b.txt 34
echo "ok: README.md's boto3 block; RGW holds readme/orders/1: b.txt's bytes, fencing-token 34"

# boto3 virtual-hosted, and through presigned URLs, for fencepost.localhost.
serve_beside hosted --s3-listen-domain localhost
read -r key_id secret < <(grep -v '^#' "$run/s3-clients" | head -n 1)
cat >"$work/hosted.want" <<'EOF'
put 33: StaleFencingToken
listed: ['orders/6']
get: b'B: shipped' {'fencing-token': '34'}
presigned get: fencepost.localhost (200, b'B: shipped')
presigned put 33: (409, 'StaleFencingToken', '34')
presigned put 35: (200, b'')
hosts: ['fencepost.localhost']
EOF
cmd="/usr/bin/python3 $here/s3_hosted.py ${door##*:} $key_id $secret"
status=0
client "$cmd" "$work/hosted.out" || status=$?
[[ $status == 0 ]] && diff -u "$work/hosted.want" "$work/hosted.out" >&2 || {
  cat "$work/hosted.out" >&2
  fail "s3_hosted.py exited $status, or its output is not what it should be"
}
printf 'B: delivered' >"$run/delivered.txt"
check_object hosted/orders/6 delivered.txt 35
echo "ok: boto3 virtual-hosted and presigned for fencepost.localhost; RGW holds hosted/orders/6: delivered.txt's bytes, fencing-token 35"
echo "ok"
