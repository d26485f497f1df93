# Shared by the example scripts (sourced, not run). They find fencepost
# and the C++ programs as `built` says (building them when need be), unless
# FENCEPOST, LEADER and COUNTER name them.

# What the caller's shell holds of FENCEPOST_* (a FENCEPOST_MODE=observe,
# a FENCEPOST_ADMIN of another server) would change the servers the examples
# start and send their client commands elsewhere: none of it is used. The
# client commands get FENCEPOST_DATA and FENCEPOST_ADMIN from start_server,
# and `serve` starts a server with no FENCEPOST_* at all.
while read -r variable; do
  unset "$variable"
done < <(compgen -e | grep '^FENCEPOST_' || true)
examples_checkout=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# needs COMMAND...: each COMMAND must be on the PATH; when one is missing,
# scripts/deps.sh examples installs what the examples run (etcd-server,
# curl, procps, and what building them takes), else it exits 2 saying so.
needs() {
  local command
  for command in "$@"; do
    command -v "$command" >/dev/null 2>&1 && continue
    if [ -x "$examples_checkout/scripts/deps.sh" ]; then
      echo "$command is missing: installing what the examples need" \
        "(scripts/deps.sh examples)" >&2
      "$examples_checkout/scripts/deps.sh" examples >&2 || exit 2
      command -v "$command" >/dev/null 2>&1 && continue
    fi
    echo "$command is missing: scripts/deps.sh examples installs it" >&2
    exit 2
  done
}
needs curl pgrep

# built NAME PATH: the program the examples run as NAME: NAME on the PATH,
# else PATH (relative to a build directory) as scripts/run.sh (build-release),
# scripts/test.sh (build-test) or the README's cmake commands (build) built
# it, else it is built now as scripts/run.sh builds fencepost (in
# build-release, once); when that cannot be, it exits 2 saying what to do.
built() {
  local name=$1 path=$2 build
  if command -v "$name" >/dev/null 2>&1; then
    echo "$name"
    return
  fi
  for build in build-release build-test build; do
    if [ -x "$examples_checkout/$build/$path" ]; then
      echo "$examples_checkout/$build/$path"
      return
    fi
  done
  if [ -f "$examples_checkout/CMakeLists.txt" ] &&
    [ -x "$examples_checkout/scripts/deps.sh" ]; then
    echo "building $name in build-release (once, as scripts/run.sh builds" \
      "fencepost)" >&2
    if "$examples_checkout/scripts/deps.sh" build >&2 &&
      cmake -S "$examples_checkout" -B "$examples_checkout/build-release" \
        -G Ninja -DCMAKE_BUILD_TYPE=Release -DFENCEPOST_BUILD_TESTS=OFF >&2 &&
      cmake --build "$examples_checkout/build-release" --target "$name" >&2 &&
      [ -x "$examples_checkout/build-release/$path" ]; then
      echo "$examples_checkout/build-release/$path"
      return
    fi
    echo "building $name failed" >&2
    exit 2
  fi
  echo "$name is neither on the PATH nor built in $examples_checkout" \
    "(build-release/$path), and this is no checkout to build it in;" \
    "name it: ${name^^}=/path/to/$name" >&2
  exit 2
}

# FENCEPOST names the binary; without it, fencepost on the PATH, else a
# build of it (see built).
if [ -n "${FENCEPOST:-}" ]; then
  fencepost=$FENCEPOST
else
  fencepost=$(built fencepost proxy/fencepost) || exit 2
fi

# serve [SERVE FLAGS...]: `fencepost serve` with no FENCEPOST_* variable
# (start_server's FENCEPOST_DATA and FENCEPOST_ADMIN are for the clients).
serve() {
  local unset=() variable
  while read -r variable; do
    unset+=(-u "$variable")
  done < <(compgen -e | grep '^FENCEPOST_' || true)
  # exec: started with &, the subshell becomes fencepost, so $! is its pid.
  exec env "${unset[@]}" "$fencepost" serve "$@"
}

# signal_lease_run SIGNAL PID: SIGNAL to `lease run` PID and its process
# group (when setsid started it, it leads one), and to its command's
# process group (lease run runs the command in a group of its own): all at
# once, as a pause of the whole machine would.
signal_lease_run() {
  local job
  kill "-$1" "$2" 2>/dev/null || true
  kill "-$1" -- "-$2" 2>/dev/null || true
  for job in $(pgrep -P "$2"); do
    kill "-$1" -- "-$job" 2>/dev/null || true
  done
}

# start_server [SERVE FLAGS...]: starts `fencepost serve` on ephemeral ports
# of 127.0.0.1 with a fresh data directory, exports FENCEPOST_DATA and
# FENCEPOST_ADMIN (which the client commands read), and stops the server
# when the script exits.
start_server() {
  server_dir=$(mktemp -d)
  serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --data-dir "$server_dir/data" "$@" 2>"$server_dir/server.log" &
  server_pid=$!
  trap stop_server EXIT
  local line=""
  for _ in $(seq 1 500); do
    line=$(grep -m1 ' listening .*event=started' "$server_dir/server.log" 2>/dev/null || true)
    [ -n "$line" ] && break
    sleep 0.01
  done
  if [ -z "$line" ]; then
    echo "fencepost did not start:" >&2
    cat "$server_dir/server.log" >&2
    exit 1
  fi
  FENCEPOST_DATA=http://$(sed -n 's/.* data=\([^ ]*\) .*/\1/p' <<<"$line")
  FENCEPOST_ADMIN=http://$(sed -n 's/.* admin=\([^ ]*\) .*/\1/p' <<<"$line")
  export FENCEPOST_DATA FENCEPOST_ADMIN
}

stop_server() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  # A sanitizer's report (a sanitized build of the tests) fails the example.
  if grep -qE 'ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|WARNING: ThreadSanitizer|runtime error:' \
    "$server_dir/server.log" 2>/dev/null; then
    echo "fencepost's sanitizer reported:" >&2
    cat "$server_dir/server.log" >&2
    rm -rf "$server_dir"
    exit 1
  fi
  rm -rf "$server_dir"
}

# field NAME JSON: an integer or string member of a JSON document.
field() {
  grep -o "\"$1\":\(\"[^\"]*\"\|[0-9]*\)" <<<"$2" | head -n1 | cut -d: -f2- |
    tr -d '"'
}

# wait_for FILE PATTERN: waits (at most 10 s) until FILE has a line matching
# PATTERN; otherwise prints FILE and exits 1.
wait_for() { # FILE PATTERN
  for _ in $(seq 1 1000); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.01
  done
  echo "timed out waiting for '$2' in $1" >&2
  cat "$1" >&2
  exit 1
}

# freeze_after_renewal LEASE: freezes the server (SIGSTOP) just after it
# answered a renewal of LEASE (the next one is due a third of a TTL later),
# so that renewal is the last one it knows of. Sets `frozen` (Unix ms) and
# `renewed_ms`, the Unix ms of that renewal on the server's clock.
freeze_after_renewal() {
  local first renewed
  first=$(field renewed_at "$(curl -s "$FENCEPOST_ADMIN/v1/leases/$1")")
  renewed=$first
  while [ "$renewed" = "$first" ]; do
    sleep 0.005
    renewed=$(field renewed_at "$(curl -s "$FENCEPOST_ADMIN/v1/leases/$1")")
  done
  kill -STOP "$server_pid"
  frozen=$(date +%s%3N)
  renewed_ms=$(date -d "$renewed" +%s%3N)
}
