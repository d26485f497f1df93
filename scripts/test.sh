#!/usr/bin/env bash
# Installs what is missing, builds from nothing (warnings are errors), and runs
# every test: unit tests per library, end-to-end tests against the binary,
# the reliability harness with its negative controls, and the benchmark's
# smoke mode (it checks counts, never timings). Then the same tests under
# ASan+UBSan (with the fuzz corpora replayed), and the concurrent unit tests
# under TSan. README's "Testing" says what each pass proves and how long.
#
#   FENCEPOST_SANITIZE=address,undefined scripts/test.sh   # one sanitized run
#   FENCEPOST_SANITIZERS=0 scripts/test.sh                  # skip them (faster)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
started=$SECONDS
phase() { echo "== $1 (at $(((SECONDS - started) / 60))m$(((SECONDS - started) % 60))s)"; }

# configure BUILD_DIR SANITIZE BENCH: -O2 (g++ 12 warns falsely at -O3),
# and no debug information, which doubles the compile time of the Asio
# units; sanitized builds keep line tables (CMakeLists.txt).
configure() {
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" -DFENCEPOST_WERROR=ON \
    -DFENCEPOST_BUILD_BENCH="$3" ${2:+-DFENCEPOST_SANITIZE=$2} >/dev/null
}
# run BUILD_DIR [ctest args...]: the long tests are scheduled first (COST).
run() {
  local build=$1
  shift
  (cd "$build" && ctest --output-on-failure -j3 --timeout 300 "$@")
}

if [ -n "${FENCEPOST_SANITIZE:-}" ]; then
  build=${FENCEPOST_BUILD_DIR:-build-test-san}
  configure "$build" "$FENCEPOST_SANITIZE" OFF
  cmake --build "$build"
  run "$build"
  exit 0
fi

# Optimized, with jemalloc as shipped. The 20-cycle crash loop
# on LMDB is left to the ASan pass: the 500-cycle run covers it here.
build=${FENCEPOST_BUILD_DIR:-build-test}
phase "optimized: build"
configure "$build" "" ON
cmake --build "$build"
phase "optimized: every test"
run "$build" -E '^CrashLoopTest\.LmdbBackendNeverLosesAFence$'
phase "benchmark smoke run"
BENCH_PREBUILT="$build" tests/bench/run.sh --smoke

if [ "${FENCEPOST_SANITIZERS:-1}" != 0 ]; then
  # Line tables only (-g1, see CMakeLists.txt) and no bench programs.
  phase "ASan+UBSan: build"
  configure "$build-asan" address,undefined OFF
  cmake --build "$build-asan"
  phase "ASan+UBSan: every test, the fuzz corpora replayed"
  run "$build-asan" -E 'LmdbBackend500Cycles'
  phase "TSan: build the concurrent unit tests"
  configure "$build-tsan" thread OFF
  cmake --build "$build-tsan" --target fence_test proxy_test client_test
  phase "TSan: the concurrent unit tests"
  run "$build-tsan" -R 'Committer|Wal|Shards|Service|FenceStore|Lease|LeaderElector' \
    -E 'ZooKeeperLeasesTest|PostgresLeasesTest'
fi
phase "done"
