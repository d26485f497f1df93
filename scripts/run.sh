#!/usr/bin/env bash
# Builds fencepost (Release) and serves on the embedded LMDB default.
# Extra arguments go to `fencepost serve`, e.g. scripts/run.sh --log-format json
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DFENCEPOST_BUILD_TESTS=OFF
cmake --build build-release --target fencepost
exec build-release/proxy/fencepost serve "$@"
