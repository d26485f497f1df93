#!/usr/bin/env bash
# Installs what is missing, builds from nothing (warnings are errors), and runs
# every test: unit tests per library, end-to-end tests against the binary,
# the reliability harness with its negative controls, and the benchmark's
# smoke mode (it checks counts, never timings): about 20 minutes on 2 cores,
# what CI runs. With FENCEPOST_SANITIZERS=1, then the same tests under
# ASan+UBSan (with the fuzz corpora replayed) and the concurrent unit tests
# under TSan, about 25 minutes more. docs/testing.md says what each pass
# proves and how long.
#
# Each sanitizer build runs at the lowest priority beside the tests of the
# pass before it, which leave a core mostly idle while they wait on servers:
# the tests keep the CPU they ask for, and the build takes the rest.
#
#   FENCEPOST_SANITIZERS=1 scripts/test.sh                  # all three passes
#   FENCEPOST_SANITIZE=address,undefined scripts/test.sh   # one sanitized run
#
# It takes no arguments but --help.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
[ $# -eq 0 ] || { echo "scripts/test.sh takes no arguments (see --help)" >&2; exit 2; }
cd "$(dirname "$0")/.."
scripts/deps.sh
started=$SECONDS
phase() {
  local s=$((SECONDS - started))
  echo "== $1 (at $((s / 60))m$((s % 60))s)"
}

# configure BUILD_DIR SANITIZE BENCH: -O2 (g++ 12 warns falsely at -O3),
# and no debug information, which doubles the compile time of the Asio
# units; sanitized builds keep line tables (CMakeLists.txt).
configure() {
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" -DFENCEPOST_WERROR=ON \
    -DFENCEPOST_BUILD_BENCH="$3" ${2:+-DFENCEPOST_SANITIZE=$2} >/dev/null
}
# run BUILD_DIR JOBS [ctest args...]: the long tests are scheduled first
# (COST). Most tests wait on servers, timeouts and kills rather than
# compute, so more run at once than there are cores. (Four at once in the
# sanitized pass took as long as three: the TSan build beside it takes the
# CPU the tests leave.)
run() {
  local build=$1 jobs=$2
  shift 2
  (cd "$build" && ctest --output-on-failure -j"$jobs" --timeout 300 "$@")
}
# background_build BUILD_DIR SANITIZE [TARGET...]: configures and builds at
# the lowest priority, its output in BUILD_DIR.log; `wait_build` joins it.
background_build() {
  local build=$1 sanitize=$2
  shift 2
  configure "$build" "$sanitize" OFF
  nice -n 19 setsid cmake --build "$build" ${1:+--target "$@"} \
    >"$build.log" 2>&1 &
  bg_pid=$!
  bg_log=$build.log
}
# A failing step stops the build running beside it.
trap '[ -z "${bg_pid:-}" ] || kill -- "-$bg_pid" 2>/dev/null || true' EXIT
wait_build() {
  if ! wait "$bg_pid"; then
    tail -60 "$bg_log"
    echo "build failed (all of its output: $bg_log)" >&2
    exit 1
  fi
  bg_pid=
}

if [ -n "${FENCEPOST_SANITIZE:-}" ]; then
  build=${FENCEPOST_BUILD_DIR:-build-test-san}
  configure "$build" "$FENCEPOST_SANITIZE" OFF
  cmake --build "$build"
  run "$build" 3
  exit 0
fi

# Optimized, with jemalloc as shipped. The 20-cycle crash loop on LMDB is
# left to the ASan pass: the 500-cycle run covers it here.
build=${FENCEPOST_BUILD_DIR:-build-test}
sanitizers=${FENCEPOST_SANITIZERS:-0}
phase "optimized: build"
configure "$build" "" ON
cmake --build "$build"
if [ "$sanitizers" != 0 ]; then
  phase "ASan+UBSan: build, in the background"
  background_build "$build-asan" address,undefined
fi
phase "optimized: every test"
run "$build" 3 -E '^CrashLoopTest\.LmdbBackendNeverLosesAFence$'
phase "benchmark smoke run"
BENCH_PREBUILT="$build" tests/bench/run.sh --smoke

if [ "$sanitizers" != 0 ]; then
  wait_build
  phase "TSan: build the concurrent unit tests, in the background"
  background_build "$build-tsan" thread fence_test proxy_test client_test \
    etcd_fences_test
  phase "ASan+UBSan: every test, the fuzz corpora replayed"
  run "$build-asan" 3 -E 'LmdbBackend500Cycles'
  wait_build
  phase "TSan: the concurrent unit tests"
  run "$build-tsan" 3 -R 'Committer|Wal|Shards|Service|FenceStore|Lease|LeaderElector|Watch|EtcdFences' \
    -E 'ZooKeeperLeasesTest|PostgresLeasesTest'
fi
phase "done"
