#!/usr/bin/env bash
# Builds fencepost (Release) and serves on the embedded LMDB default, on
# 127.0.0.1:7400 (data) and 127.0.0.1:7401 (admin), data in ./fencepost-data.
#
#   scripts/run.sh [SERVE_FLAG...]
#
# Extra arguments go to `fencepost serve`, e.g. scripts/run.sh --log-format json;
# once built, build-release/proxy/fencepost serve --help lists them.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
scripts/deps.sh build
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DFENCEPOST_BUILD_TESTS=OFF
cmake --build build-release --target fencepost
exec build-release/proxy/fencepost serve "$@"
