#!/usr/bin/env bash
# A real PostgreSQL server for the tests, from the distribution's binaries
# (Debian's postgresql package), in a throw-away cluster.
#   postgres.sh start DIR    creates a cluster in DIR (a new or empty
#                            directory), starts it on 127.0.0.1 at a free
#                            port and on a socket in DIR, waits until it
#                            accepts connections and prints its URL
#                            "postgres://postgres@127.0.0.1:PORT/postgres"
#   postgres.sh stop DIR     stops it at once and removes DIR
#   postgres.sh freeze DIR   SIGSTOPs the postmaster and its children
#   postgres.sh thaw DIR     SIGCONTs them
#   postgres.sh sql DIR SQL  runs SQL as the superuser, prints the rows
# Local connections need no password (trust), in this cluster only. The
# server refuses to run as root: as root, the cluster belongs to the
# `postgres` system user. Every wait is bounded; on failure the server's
# log goes to stderr. PG_BINDIR overrides the folder of initdb and pg_ctl.
set -euo pipefail

start_timeout_s=${POSTGRES_START_TIMEOUT:-20}

. "$(dirname "$0")/lib.sh"

bindir() {
  local candidate
  for candidate in "${PG_BINDIR:-}" "$(pg_config --bindir 2>/dev/null || true)" \
    $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r); do
    if [[ -n $candidate && -x $candidate/initdb && -x $candidate/pg_ctl ]]; then
      echo "$candidate"
      return
    fi
  done
  die "no PostgreSQL server binaries (initdb, pg_ctl); Debian: postgresql"
}

# Runs a command as the cluster's owner, from a directory it may enter.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    (cd "$dir" && runuser -u postgres -- "$@")
  else
    (cd "$dir" && "$@")
  fi
}

postmaster_pid() {
  [[ -f $dir/data/postmaster.pid ]] || die "no server runs in $dir"
  head -n 1 "$dir/data/postmaster.pid"
}

# The postmaster, then its children (by parent pid).
server_pids() {
  local pid
  pid=$(postmaster_pid) || exit 1
  echo "$pid"
  ps -o pid= --ppid "$pid" || true
}

# Tries to run the server on `port`: 0 once it accepts connections, 1 when
# the port turned out to be taken, exits on any other failure.
try_start() {
  local port=$1 bin=$2 deadline
  : >"$dir/server.log"
  [[ $(id -u) -eq 0 ]] && chown postgres "$dir/server.log"
  if ! as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -s \
    -o "-p $port -k $dir/socket -c listen_addresses=127.0.0.1" start; then
    grep -q "could not bind\|already in use" "$dir/server.log" && return 1
    die "pg_ctl start failed"
  fi
  deadline=$((SECONDS + start_timeout_s))
  until pg_isready -q -h 127.0.0.1 -p "$port" -t 1 2>/dev/null; do
    if grep -q "could not bind\|already in use" "$dir/server.log"; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -s -m immediate stop || true
      return 1
    fi
    ((SECONDS < deadline)) || die "not accepting connections after ${start_timeout_s}s"
    sleep 0.1
  done
}

start() {
  local bin port attempt
  bin=$(bindir)
  mkdir -p "$dir"
  [[ -z $(ls -A "$dir") ]] || die "$dir is not empty"
  mkdir "$dir/socket"
  if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root needs a postgres user"
    chown -R postgres "$dir"
    runuser -u postgres -- test -x "$dir" ||
      die "the postgres user cannot enter $dir (start it in a folder such as \$TMPDIR)"
  fi
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust \
    --encoding=UTF8 --locale=C.UTF-8 --no-instructions >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if try_start "$port" "$bin"; then
      echo "postgres://postgres@127.0.0.1:$port/postgres"
      return
    fi
  done
  die "no free port after $attempt attempts"
}

stop() {
  local bin pid
  [[ -d $dir ]] || return 0
  if [[ -f $dir/data/postmaster.pid ]]; then
    bin=$(bindir)
    pid=$(postmaster_pid)
    signal CONT
    as_owner "$bin/pg_ctl" -D "$dir/data" -s -m immediate -t 10 stop ||
      { kill -KILL "$pid" 2>/dev/null || true; }
    # Gone once it is a zombie: reaping it is its parent's business.
    for _ in $(seq 50); do
      [[ $(ps -o stat= -p "$pid" || true) == [^Z]* ]] || break
      sleep 0.1
    done
  fi
  rm -rf "$dir"
}

signal() {
  local pid pids stopped=" " round
  pids=$(server_pids) || exit 1
  for pid in $pids; do kill -"$1" "$pid" 2>/dev/null || true; done
  [[ $1 == STOP ]] || return 0
  # SIGSTOP lands when each process next runs: until then it may answer,
  # and the postmaster may fork a backend after the list was read. Stop
  # and wait for each, until the list holds no process not yet stopped.
  for ((round = 0; round < 10; round++)); do
    local new=0
    for pid in $pids; do
      [[ $stopped == *" $pid "* ]] && continue
      kill -STOP "$pid" 2>/dev/null || true
      wait_stopped "$pid"
      stopped+="$pid "
      new=1
    done
    ((new)) || return 0
    pids=$(server_pids) || exit 1
  done
  die "new PostgreSQL processes kept appearing while freezing"
}

# Waits, at most 5 s, until every thread of PID is stopped (or gone).
wait_stopped() {
  local i task stat stopped
  for ((i = 0; i < 500; i++)); do
    stopped=1
    for task in /proc/"$1"/task/*; do
      stat=$(cat "$task/stat" 2>/dev/null) || continue
      stat=${stat##*) }
      [[ ${stat:0:1} == [TtZX] ]] || stopped=0
    done
    ((stopped)) && return 0
    sleep 0.01
  done
  die "process $1 did not stop within 5 s of SIGSTOP"
}

sql() {
  psql -X -q -t -A -v ON_ERROR_STOP=1 -h "$dir/socket" -p "$(port)" \
    -U postgres -d postgres -c "$1"
}

port() {
  sed -n 4p "$dir/data/postmaster.pid"
}

[[ $# -ge 2 ]] || die "usage: postgres.sh start|stop|freeze|thaw|sql DIR [SQL]"
dir=$(realpath -m "$2")
case $1 in
  start) start ;;
  stop) stop ;;
  freeze) signal STOP ;;
  thaw) signal CONT ;;
  sql) [[ $# -eq 3 ]] || die "usage: postgres.sh sql DIR SQL"; sql "$3" ;;
  *) die "unknown command $1" ;;
esac
