#!/usr/bin/env bash
# Installs what is missing, builds from nothing (warnings are errors), and runs
# every test: unit tests per library, end-to-end tests against the binary,
# the reliability harness, and the benchmark's smoke mode (it checks counts,
# never timings). Then the same tests under ASan+UBSan, and the concurrent
# unit tests under TSan.
#
#   FENCEPOST_SANITIZE=address,undefined scripts/test.sh   # one sanitized run
#   FENCEPOST_SANITIZERS=0 scripts/test.sh                  # skip them (faster)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

# suite BUILD_DIR SANITIZE TARGETS [ctest args...]; TARGETS "all" or a list
suite() {
  local build=$1 sanitize=$2 targets=$3
  shift 3
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFENCEPOST_WERROR=ON -DFENCEPOST_BUILD_BENCH=ON \
    ${sanitize:+-DFENCEPOST_SANITIZE=$sanitize}
  # shellcheck disable=SC2086
  cmake --build "$build" --target $targets
  (cd "$build" && ctest --output-on-failure -j2 --timeout 300 "$@")
}

if [ -n "${FENCEPOST_SANITIZE:-}" ]; then
  suite "${FENCEPOST_BUILD_DIR:-build-test-san}" "$FENCEPOST_SANITIZE" all
  exit 0
fi

build=${FENCEPOST_BUILD_DIR:-build-test}
suite "$build" "" all
BENCH_PREBUILT="$build" tests/bench/run.sh --smoke
echo "== libFuzzer: each target briefly"
FENCEPOST_FUZZ_BUILD_DIR="$build-fuzz" tests/fuzz/run.sh 10

if [ "${FENCEPOST_SANITIZERS:-1}" != 0 ]; then
  echo "== ASan+UBSan: every test"
  # The 500-cycle crash loop runs once, above; here its 20-cycle case runs.
  suite "$build-asan" address,undefined all -E 'LmdbBackend500Cycles'
  echo "== TSan: the concurrent unit tests"
  suite "$build-tsan" thread "fence_test proxy_test client_test" \
    -R 'Committer|Wal|Shards|Service|FenceStore|Lease|LeaderElector'
fi
