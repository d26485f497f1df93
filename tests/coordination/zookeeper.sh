#!/usr/bin/env bash
# A real standalone ZooKeeper server for the tests, from the distribution's
# jars (Debian's zookeeper package).
#   zookeeper.sh start DIR   starts one with its data, config and log in DIR,
#                            waits until it answers and prints its URL
#                            "zk://127.0.0.1:PORT"
#   zookeeper.sh stop DIR    stops the one started in DIR and waits for it
#   zookeeper.sh word DIR W  prints the reply of the one started in DIR to
#                            the four-letter word W (ruok, srvr, cons, dump)
# Every wait is bounded; on failure the server's log goes to stderr.
# ZOOKEEPER_JARS overrides the folder holding the jars.
set -euo pipefail

jars=${ZOOKEEPER_JARS:-/usr/share/java}
start_timeout_s=${ZOOKEEPER_START_TIMEOUT:-30}

. "$(dirname "$0")/lib.sh"

# The reply of the server on port $1 to the four-letter word $2.
word() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf %s $2 >&3 && cat <&3" 2>/dev/null
}

# Serving requests? ("ruok" says imok before the server is.)
answers() {
  [[ $(word "$1" srvr || true) == *"Mode: standalone"* ]]
}

write_config() {
  cat >"$dir/zoo.cfg" <<CFG
tickTime=200
minSessionTimeout=400
maxSessionTimeout=60000
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$1
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,cons,dump
CFG
}

# Tries to run one server on `port`; returns 0 once it answers, 1 when the
# port turned out to be taken, exits on any other failure.
try_start() {
  local port=$1 pid deadline
  write_config "$port"
  : >"$dir/server.log"
  # QuorumPeerMain on a config without servers runs a standalone server.
  # zookeeper.jar's manifest names its dependencies; slf4j-simple is the
  # log binding, with the level and target set below.
  java -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dzookeeper.jmx.log4j.disable=true -Dzookeeper.admin.enableServer=false \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -Dorg.slf4j.simpleLogger.logFile=System.err \
    -cp "$jars/zookeeper.jar:$jars/zookeeper-jute.jar:$jars/slf4j-api.jar:$jars/slf4j-simple.jar" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
    </dev/null >>"$dir/server.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/server.pid"
  deadline=$((SECONDS + start_timeout_s))
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      rm -f "$dir/server.pid"
      grep -q 'Address already in use' "$dir/server.log" && return 1
      die "the server exited while starting"
    fi
    if answers "$port"; then
      echo "$port" >"$dir/port"
      return 0
    fi
    sleep 0.1
  done
  stop_server
  die "the server did not answer within ${start_timeout_s}s"
}

stop_server() {
  [[ -f $dir/server.pid ]] || return 0
  local pid i
  pid=$(<"$dir/server.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
    fi
    kill -0 "$pid" 2>/dev/null && die "process $pid did not exit"
  fi
  rm -f "$dir/server.pid"
}

cmd=${1:-}
dir=${2:-}
[[ -n $cmd && -n $dir ]] || die "usage: zookeeper.sh start|stop|word DIR [WORD]"
case $cmd in
  start)
    command -v java >/dev/null || die "java not found"
    [[ -f $jars/zookeeper.jar ]] || die "$jars/zookeeper.jar not found"
    mkdir -p "$dir/data"
    dir=$(cd "$dir" && pwd)
    [[ -f $dir/server.pid ]] && kill -0 "$(<"$dir/server.pid")" 2>/dev/null &&
      die "a server already runs for $dir"
    for _ in 1 2 3 4 5; do
      port=$(free_port)
      if try_start "$port"; then
        echo "zk://127.0.0.1:$port"
        exit 0
      fi
    done
    die "no free port found"
    ;;
  stop)
    [[ -d $dir ]] || exit 0
    dir=$(cd "$dir" && pwd)
    stop_server
    ;;
  word)
    [[ -f $dir/port ]] || die "no server was started in $dir"
    word "$(<"$dir/port")" "${3:?usage: zookeeper.sh word DIR WORD}" ||
      die "no reply to '$3'"
    ;;
  *) die "unknown command '$cmd' (start, stop or word)" ;;
esac
