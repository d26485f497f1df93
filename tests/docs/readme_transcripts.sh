#!/usr/bin/env bash
# Runs the README's transcripts against a real fencepost and compares what
# they print with what the README shows:
#  - every ```console block: each `$ COMMAND` is run, and its standard
#    output must be the lines shown under it (status lines, the headers
#    shown, bodies). A block whose commands name localhost:7400 or :7401
#    runs against a fresh server of its own (the ports rewritten to the
#    server's); `examples/...` runs from the repository's root. A line
#    `...` stands for any number of lines. Before comparing, times
#    (2026-11-29T08:47:13.094029Z) and numbers of 13 digits or more (event
#    ids, clock readings) are replaced on both sides, and so is the
#    Content-Length of an answer whose body holds a time, and why `lease
#    run` says it lost its lease (its watch of the fence and its clock
#    race after a freeze); the watch terminal's lease renewals are left
#    out (how many fall before a freeze is chance).
#  - a ```console block after the marker <!-- tests/docs/readme_transcripts.sh
#    runs the next console block against a real S3 store -->: the same,
#    but against a real Ceph RGW started for it (tests/coordination/rgw.sh,
#    stopped at the end), its endpoint and credentials exported to the
#    server and to the block's commands (S3_ENDPOINT, AWS_*), and the
#    server started with the flags of the README's last `fencepost serve`
#    line before the marker (its ports 7420 and 7421 free ones, and its data
#    directory under /tmp the test's), in the same directory as, and
#    beside, a server started as scripts/run.sh starts it, which must still
#    run afterwards.
#  - the ```sh block after the marker <!-- tests/docs/readme_transcripts.sh
#    runs the next sh block beside scripts/run.sh -->: run as written
#    (ports rewritten) beside a server started as scripts/run.sh starts it,
#    in the same directory; it must exit 0, and that server must start
#    again afterwards on its data directory.
# Prints what differs and exits 1 if anything does.
#   readme_transcripts.sh FENCEPOST_BINARY
set -euo pipefail

binary=$(realpath "${1:?usage: readme_transcripts.sh FENCEPOST_BINARY}")
root=$(cd "$(dirname "$0")/../.." && pwd)
readme=$root/README.md
for tool in curl awk sed diff; do
  command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }
done

# The servers start with their defaults, whatever the caller's settings.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^FENCEPOST_' || true)

work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-readme.XXXXXX")
pids=()
rgw_dir=
cleanup() {
  if [[ -n $rgw_dir && -d $rgw_dir ]]; then
    "$root/tests/coordination/rgw.sh" stop "$rgw_dir" >/dev/null 2>&1 || true
  fi
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() {
  echo "FAILED: $*" >&2
  failures=$((failures + 1))
}

# start_server DIR [FLAG...]: a fencepost serving from DIR (its working
# directory) on free ports, logging to DIR/$server_log; sets $pid, $data
# and $admin (HOST:PORT).
server_log=log
start_server() {
  local dir=$1 line
  shift
  mkdir -p "$dir"
  (cd "$dir" && exec "$binary" serve --listen 127.0.0.1:0 \
    --admin-listen 127.0.0.1:0 "$@" >"$server_log" 2>&1) &
  pid=$!
  pids+=("$pid")
  data='' admin=''
  for _ in $(seq 300); do
    # The start-up line (event=started) names both ports as fields; read
    # once, so that both come from the whole line.
    line=$(grep -m1 'event=started' "$dir/$server_log" 2>/dev/null || true)
    data=$(sed -nE 's/.* data=([^ ]+).*/\1/p' <<<"$line")
    admin=$(sed -nE 's/.* admin=([^ ]+).*/\1/p' <<<"$line")
    [[ -n $data && -n $admin && $line == *mode=* ]] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "fencepost did not start in $dir; its log:" >&2
  cat "$dir/$server_log" >&2
  return 1
}

stop_server() {
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# A port of 127.0.0.1 nothing listens on now, outside the ephemeral range.
free_port() {
  local port
  for _ in $(seq 100); do
    port=$((20000 + RANDOM % 10000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
  echo "no free port" >&2
  return 1
}

# The times and clock readings of a run, and the Content-Length of an
# answer that holds a time, made comparable.
normalise() {
  local text
  text=$(tr -d '\r' | sed -E \
    -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z/<time>/g' \
    -e 's/[0-9]{13,}/<n>/g' \
    -e 's/(lease run: lease lost:) .*(; sending SIGTERM)/\1 <why>\2/' \
    -e '/"event":"lease".*"change":"renewed"/d')
  if [[ $text == *'<time>'* ]]; then
    text=$(sed -E 's/^(Content-Length:) [0-9]+$/\1 <n>/I' <<<"$text")
  fi
  # Trailing blank lines are the transcript's spacing, not output.
  printf '%s\n' "$text" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'
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

# The console blocks, one file each: block-N. A block after the S3 marker
# also gets block-N.s3: the last `fencepost serve` line before it.
s3_marker='<!-- tests/docs/readme_transcripts.sh runs the next console block against a real S3 store -->'
awk -v dir="$work" -v m="$s3_marker" '
  /^fencepost serve / { serve = $0 }
  $0 == m { s3 = 1; next }
  /^```console$/ {
    inside = 1; ++n
    if (s3) { print serve > (dir "/block-" n ".s3"); close(dir "/block-" n ".s3") }
    s3 = 0
    next
  }
  /^```/ && inside { inside = 0; next }
  inside { print > (dir "/block-" n) }
' "$readme"
[[ -s $work/block-1 ]] || { echo "README.md shows no console block" >&2; exit 1; }

# start_rgw: a real S3 store (rgw.sh, stopped by cleanup, or by its watcher
# if this script dies), once; its endpoint and credentials exported.
start_rgw() {
  if [[ -z $rgw_dir ]]; then
    rgw_dir=$work/rgw
    if ! "$root/tests/coordination/rgw.sh" start "$rgw_dir" "$$" \
      >"$work/rgw.log" 2>&1; then
      cat "$work/rgw.log" >&2
      return 1
    fi
  fi
  set -a
  # shellcheck disable=SC1091  # written by rgw.sh
  . "$rgw_dir/env"
  set +a
}

# run_block FILE: runs the commands of one console block and compares.
run_block() {
  local block=$1 cmd='' n='' server='' serve_line='' beside_run_sh=''
  local -a serve_flags=()
  if [[ -e $block.s3 ]]; then
    serve_line=$(cat "$block.s3")
    if [[ $serve_line != 'fencepost serve '* ]]; then
      fail "README.md has no \`fencepost serve\` line before its S3 block"
      return
    fi
    if ! start_rgw; then
      fail "the S3 store for README.md's S3 block did not start"
      return
    fi
    # Beside a server as scripts/run.sh starts it (./fencepost-data, its
    # own ports), in the same directory.
    local here=$work/$(basename "$block")-server
    start_server "$here"
    beside_run_sh=$pid
    serve_line=${serve_line//\/tmp\/fencepost-s3/$here\/fencepost-s3}
    eval "serve_flags=(${serve_line#fencepost serve })"
    # Its own ports as the README gives them (7420, 7421) become free ones.
    local -a flags=()
    local skip=0 flag
    for flag in "${serve_flags[@]}"; do
      if ((skip)); then skip=0; continue; fi
      case $flag in --listen | --admin-listen) skip=1; continue ;; esac
      flags+=("$flag")
    done
    serve_flags=("${flags[@]}")
    server_log=log-s3
    if ! start_server "$here" "${serve_flags[@]}"; then
      server_log=log
      fail "README.md's S3 story did not start beside scripts/run.sh's server"
      stop_server "$beside_run_sh"
      return
    fi
    server_log=log
    server=$pid
  elif grep -qE 'localhost:740[01]' "$block"; then
    start_server "$work/$(basename "$block")-server"
    server=$pid
  fi
  # Commands and what the README shows under each, in pairs of files.
  awk -v out="$block" '
    /^\$ / { ++n; sub(/^\$ /, ""); print > (out "." n ".cmd"); next }
    n { print > (out "." n ".expected") }
  ' "$block"
  for cmd_file in "$block".*.cmd; do
    n=${cmd_file%.cmd}
    cmd=$(cat "$cmd_file")
    local run=$cmd
    run=${run//localhost:7400/$data}
    run=${run//localhost:7401/$admin}
    run=${run//localhost:7420/$data}
    run=${run//localhost:7421/$admin}
    local dir=$work
    [[ $cmd == examples/* ]] && dir=$root
    # In a process group of its own, stopped after it: nothing a command
    # leaves running outlives it.
    (cd "$dir" && FENCEPOST=$binary exec setsid bash -c "$run" \
      >"$n.actual" 2>"$n.stderr") &
    local group=$!
    wait "$group" || true
    kill -TERM -- "-$group" 2>/dev/null || true
    touch "$n.expected"
    normalise <"$n.expected" >"$n.want"
    normalise <"$n.actual" >"$n.got"
    if ! matches "$n.want" "$n.got"; then
      fail "README.md's \`\$ $cmd\` printed otherwise (- README, + this run):"
      diff -u "$n.want" "$n.got" | tail -n +3 >&2 || true
      echo "its standard error:" >&2
      cat "$n.stderr" >&2
    fi
  done
  [[ -z $server ]] || stop_server "$server"
  if [[ -e $block.s3 ]]; then
    unset S3_ENDPOINT S3_REGION S3_BUCKET AWS_ACCESS_KEY_ID \
      AWS_SECRET_ACCESS_KEY CEPH_CONF
    if ! kill -0 "$beside_run_sh" 2>/dev/null; then
      fail "the server started as scripts/run.sh starts it did not outlive README.md's S3 story"
    fi
    stop_server "$beside_run_sh"
  fi
}

blocks=$(grep -c '^```console$' "$readme")
for ((i = 1; i <= blocks; i++)); do
  run_block "$work/block-$i"
done

# The sh block after the marker, beside a server started as scripts/run.sh
# starts it (its defaults: ./fencepost-data, no scope) in the same
# directory.
marker='<!-- tests/docs/readme_transcripts.sh runs the next sh block beside scripts/run.sh -->'
awk -v m="$marker" '
  $0 == m { armed = 1; next }
  armed && /^```sh$/ { inside = 1; next }
  inside && /^```/ { exit }
  inside { print }
' "$readme" >"$work/beside.sh"
if [[ ! -s $work/beside.sh ]]; then
  fail "README.md has no sh block after '$marker'"
else
  beside=$work/beside
  start_server "$beside"
  run_sh=$pid
  script=$(cat "$work/beside.sh")
  for port in 7410 7411; do
    script=${script//localhost:$port/127.0.0.1:$port}
    script=${script//127.0.0.1:$port/127.0.0.1:$(free_port)}
  done
  script=${script//localhost:7400/$data}
  script=${script//localhost:7401/$admin}
  # In a process group of its own, so that what it leaves running is
  # stopped with it.
  (cd "$beside" && PATH="$(dirname "$binary"):$PATH" exec setsid \
    timeout 30 bash -c "$script" >"$beside/out" 2>&1) &
  group=$!
  status=0
  wait "$group" || status=$?
  kill -TERM -- "-$group" 2>/dev/null || true
  if [[ $status != 0 ]]; then
    fail "the README's sh block beside scripts/run.sh exited $status:"
    cat "$beside/out" >&2
  fi
  stop_server "$run_sh"
  if ! start_server "$beside"; then
    fail "after the README's sh block, scripts/run.sh's server does not start again"
  else
    stop_server "$pid"
  fi
fi

if [[ $failures != 0 ]]; then
  echo "$failures of the README's transcripts differ from a real run" >&2
  exit 1
fi
echo "the README's transcripts match a real run"
