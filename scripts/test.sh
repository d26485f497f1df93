#!/usr/bin/env bash
# Installs what is missing, builds from nothing (warnings are errors), and runs
# every test: unit tests per library, end-to-end tests against the binary,
# and the benchmark's smoke mode (it checks counts, never timings).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
build=${FENCEPOST_BUILD_DIR:-build-test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFENCEPOST_WERROR=ON -DFENCEPOST_BUILD_BENCH=ON \
  ${FENCEPOST_SANITIZE:+-DFENCEPOST_SANITIZE=$FENCEPOST_SANITIZE}
cmake --build "$build"
(cd "$build" && ctest --output-on-failure -j2 --timeout 300)
if [ -z "${FENCEPOST_SANITIZE:-}" ]; then
  BENCH_PREBUILT="$build" tests/bench/run.sh --smoke
fi
