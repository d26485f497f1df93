# Shared by the example scripts (sourced, not run). They find fencepost
# and the C++ leader as `built` says, unless FENCEPOST and LEADER name them.

# built NAME PATH...: the program the examples run as NAME: NAME on the
# PATH, else the first PATH (relative to the checkout) that was built, else
# it exits 2 saying what to do.
examples_checkout=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
built() {
  local name=$1 path
  shift
  if command -v "$name" >/dev/null 2>&1; then
    echo "$name"
    return
  fi
  for path in "$@"; do
    if [ -x "$examples_checkout/$path" ]; then
      echo "$examples_checkout/$path"
      return
    fi
  done
  echo "$name is neither on the PATH nor built in $examples_checkout" \
    "($*); run scripts/run.sh, or name it: ${name^^}=/path/to/$name" >&2
  exit 2
}

# FENCEPOST names the binary; without it, fencepost on the PATH, else the
# build of scripts/run.sh (build-release), of scripts/test.sh (build-test)
# or of the README's cmake commands (build).
if [ -n "${FENCEPOST:-}" ]; then
  fencepost=$FENCEPOST
else
  fencepost=$(built fencepost build-release/proxy/fencepost \
    build-test/proxy/fencepost build/proxy/fencepost) || exit 2
fi

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
  "$fencepost" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --data-dir "$server_dir/data" "$@" 2>"$server_dir/server.log" &
  server_pid=$!
  trap stop_server EXIT
  local line=""
  for _ in $(seq 1 500); do
    line=$(grep -m1 ' listening data=.* event=started' "$server_dir/server.log" 2>/dev/null || true)
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
