# shellcheck shell=bash
# Shell functions the benchmark scripts share; sourced.

# A TCP port on 127.0.0.1 that nothing listens on.
free_port() {
  local port
  while true; do
    port=$((20000 + RANDOM % 12000))
    (: </dev/tcp/127.0.0.1/$port) 2>/dev/null || { echo "$port"; return; }
  done
}

# metric PORT NAME_WITH_LABELS: the value of a sample on fencepost's admin
# port (0 when it has none).
metric() {  # PORT NAME_WITH_LABELS
  curl -fsS "http://127.0.0.1:$1/metrics" |
    awk -v m="$2" 'index($0, m " ") == 1 { print $2 + 0; found = 1 }
                   END { if (!found) print 0 }'
}

# lf FIELD LINE: a field ("NAME=VALUE") of the load generator's output line.
lf() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# thread_dir PID NAME: /proc's directory of PID's thread of that name, or
# nothing when it has none.
thread_dir() {
  local task
  for task in "/proc/$1/task"/*; do
    [[ $(cat "$task/comm" 2>/dev/null) == "$2" ]] && { echo "$task"; return; }
  done
  return 0
}
