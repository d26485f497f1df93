#!/usr/bin/env bash
# Every script a user runs (each executable *.sh of scripts/, tests/bench/
# and examples/, tests/fuzz/run.sh and .ci/run) answers --help with its usage and starts nothing: exit 0,
# standard output naming the script as it is called from the checkout's
# top, standard error empty. Each runs in a copy of those folders with a
# PATH of only the tools a usage needs (bash, sh, env, sed, awk, cat, head,
# tail, grep, dirname, basename): a command it tries beyond them is
# recorded (bash's command_not_found_handle) and fails the check, and so do
# a file it adds, removes or changes in the copy and a run past 10 s.
# A negative control, a script that builds instead of answering, must fail
# the same check.
# Prints what failed and exits 1 if anything did.
#   scripts_help.sh
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-help.XXXXXX")
trap 'rm -rf "$work"' EXIT
copy=$work/checkout
mkdir -p "$copy/tests" "$work/bin"
cp -r "$root/scripts" "$root/examples" "$root/.ci" "$copy/"
cp -r "$root/tests/bench" "$root/tests/fuzz" "$copy/tests/"

for tool in bash sh env sed awk cat head tail grep dirname basename; do
  ln -s "$(command -v "$tool")" "$work/bin/$tool"
done
calls=$work/calls
# A command not on that PATH, in the script or in a bash it starts.
command_not_found_handle() {
  echo "$1" >>"$FENCEPOST_HELP_CALLS"
  return 127
}
export -f command_not_found_handle

listing() {
  (cd "$copy" && find . -printf '%p %s %T@\n' | LC_ALL=C sort)
}

# check SCRIPT: why SCRIPT's --help does not pass, on standard output;
# nothing when it does.
check() {
  local script=$1 status=0
  rm -f "$calls"
  listing >"$work/before"
  (cd "$copy" && timeout 10 env PATH="$work/bin" \
    FENCEPOST_HELP_CALLS="$calls" "./$script" --help \
    >"$work/out" 2>"$work/err" </dev/null) || status=$?
  listing >"$work/after"
  [[ $status == 0 ]] || echo "exits $status"
  [[ ! -s $calls ]] || echo "runs $(sort -u "$calls" | paste -sd ' ')"
  [[ ! -s $work/err ]] || echo "writes to standard error: $(head -3 "$work/err")"
  grep -qF -- "$script" "$work/out" || echo "does not name $script in its usage"
  cmp -s "$work/before" "$work/after" ||
    echo "changes the checkout: $(diff "$work/before" "$work/after" | grep '^[<>]' | head -3)"
}

failures=0
checked=0
for script in $(cd "$copy" && find scripts tests/bench examples -maxdepth 1 \
  -name '*.sh' -type f -perm -u+x | LC_ALL=C sort) tests/fuzz/run.sh .ci/run; do
  checked=$((checked + 1))
  why=$(check "$script")
  if [[ -n $why ]]; then
    echo "FAILED: $script --help:" >&2
    sed 's/^/  /' <<<"$why" >&2
    failures=$((failures + 1))
  fi
done
if ((checked == 0)) || [[ ! -x $copy/scripts/test.sh ]]; then
  echo "no scripts found to check" >&2
  exit 1
fi

# The control: a script that ignores --help and builds.
cat >"$copy/scripts/control.sh" <<'EOF'
#!/usr/bin/env bash
# A script without --help: scripts/control.sh
set -euo pipefail
echo "configuring" >build-control.log
cmake -S . -B build-control
EOF
chmod +x "$copy/scripts/control.sh"
why=$(check scripts/control.sh)
if [[ $why != *'runs cmake'* || $why != *'changes the checkout'* ||
  $why != *'exits '* ]]; then
  echo "FAILED: the control (a script that builds on --help) passed the check: ${why:-no complaint}" >&2
  failures=$((failures + 1))
fi

if ((failures > 0)); then
  echo "$failures of $checked scripts (or the control) failed" >&2
  exit 1
fi
echo "all $checked scripts answer --help with their usage and start nothing; the control fails"
