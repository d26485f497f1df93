#!/usr/bin/env bash
# The examples, run as the README says after scripts/run.sh (which builds
# only fencepost, in build-release): examples/leaders.sh builds the C++
# leader it runs (as scripts/run.sh builds, in build-release) instead of
# exiting 2; a FENCEPOST_* variable left in the caller's shell reaches none
# of the servers an example starts; and examples/split_brain.sh replicas
# without etcd runs scripts/deps.sh examples (which installs etcd-server)
# instead of failing on a missing command.
#
# In a copy of the checkout whose scripts/deps.sh and cmake only record
# their calls (the "build" links the test build's leader), so nothing is
# installed or compiled.
#
# Usage: builds_what_it_needs.sh SOURCE_DIR FENCEPOST_BINARY LEADER_BINARY
set -euo pipefail
source=$1
binary=$2
leader=$3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-examples-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
checkout=$tmp/checkout
mkdir -p "$checkout/scripts" "$checkout/build-release/proxy" "$tmp/bin"
cp -r "$source/examples" "$checkout/examples"
mkdir -p "$checkout/tests"
cp -r "$source/tests/coordination" "$checkout/tests/coordination"
touch "$checkout/CMakeLists.txt"
ln -s "$binary" "$checkout/build-release/proxy/fencepost"
cat >"$checkout/scripts/deps.sh" <<EOF
#!/usr/bin/env bash
echo "deps.sh \$*" >>"$tmp/calls"
EOF
cat >"$tmp/bin/cmake" <<EOF
#!/usr/bin/env bash
echo "cmake \$*" >>"$tmp/calls"
if [ "\$1" = --build ] && [ "\$3" = --target ] && [ "\$4" = leader ]; then
  mkdir -p "\$2/examples/leader"
  ln -s "$leader" "\$2/examples/leader/leader"
fi
EOF
chmod +x "$checkout/scripts/deps.sh" "$tmp/bin/cmake"

# The PATH without any directory that holds a fencepost or a leader.
path=$tmp/bin
IFS=: read -ra dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
  [ -e "$dir/fencepost" ] || [ -e "$dir/leader" ] || path=$path:$dir
done

fail() {
  echo "$*" >&2
  [ -f "$tmp/calls" ] && { echo "--- calls:" >&2; cat "$tmp/calls" >&2; }
  exit 1
}

cd "$checkout"
# A serve flag from the caller's shell that would stop every server.
if ! env -u FENCEPOST -u LEADER FENCEPOST_LOG_FORMAT=bogus PATH="$path" \
  examples/leaders.sh >"$tmp/leaders.out" 2>&1; then
  cat "$tmp/leaders.out" >&2
  fail "examples/leaders.sh failed after scripts/run.sh"
fi
grep -q "^cmake --build $checkout/build-release --target leader$" "$tmp/calls" ||
  fail "examples/leaders.sh did not build the leader in build-release"
grep -q "^deps.sh build$" "$tmp/calls" ||
  fail "examples/leaders.sh did not install the build's packages first"
# Built once: the next run finds it.
rm "$tmp/calls"
env -u FENCEPOST -u LEADER PATH="$path" examples/leaders.sh >/dev/null 2>&1 ||
  fail "examples/leaders.sh failed on its second run"
[ ! -f "$tmp/calls" ] || fail "examples/leaders.sh built the leader again"

# No etcd on the PATH (every other program of /usr/bin and /bin is).
mkdir "$tmp/no-etcd"
for program in /usr/bin/* /bin/*; do
  name=${program##*/}
  [ "$name" = etcd ] || [ -e "$tmp/no-etcd/$name" ] ||
    ln -s "$program" "$tmp/no-etcd/$name"
done
status=0
env -u FENCEPOST PATH="$tmp/bin:$tmp/no-etcd" \
  examples/split_brain.sh replicas >"$tmp/replicas.out" 2>&1 || status=$?
[ "$status" = 2 ] || { cat "$tmp/replicas.out" >&2; fail "split_brain.sh replicas without etcd exited $status, not 2"; }
grep -q "^deps.sh examples$" "$tmp/calls" ||
  fail "split_brain.sh replicas did not run scripts/deps.sh examples"
grep -q "etcd is missing: scripts/deps.sh examples installs it" "$tmp/replicas.out" ||
  fail "split_brain.sh replicas did not say what installs etcd: $(cat "$tmp/replicas.out")"
echo "the examples build and install what they need, and ignore FENCEPOST_* of the caller"
