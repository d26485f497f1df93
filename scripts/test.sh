#!/usr/bin/env bash
# Installs what is missing, builds from nothing (warnings are errors), and runs
# every test: unit tests per library and end-to-end tests against the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
build=${FENCEPOST_BUILD_DIR:-build-test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFENCEPOST_WERROR=ON ${FENCEPOST_SANITIZE:+-DFENCEPOST_SANITIZE=$FENCEPOST_SANITIZE}
cmake --build "$build"
cd "$build"
ctest --output-on-failure -j2 --timeout 300
