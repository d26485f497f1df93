# Sourced by the server scripts of tests/coordination.

# die MESSAGE: says what failed, as "SCRIPT: MESSAGE", followed by the last
# 40 lines of $dir/server.log when there is one, and exits 1.
die() {
  echo "${0##*/}: $*" >&2
  if [[ -n ${dir:-} && -f $dir/server.log ]]; then
    echo "--- $dir/server.log (last 40 lines) ---" >&2
    tail -n 40 "$dir/server.log" >&2
  fi
  exit 1
}
