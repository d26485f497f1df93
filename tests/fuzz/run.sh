#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (ASan+UBSan) and runs each for
# SECONDS (default 10) from the seed corpus in tests/fuzz/corpus, on a copy,
# so the repository's corpus only changes by hand. Prints each target's
# executions; any crash fails the script and leaves its input in the build
# dir.
#
#   tests/fuzz/run.sh          # 10 s each (the test command replays the
#                              # seed corpora under ASan instead)
#   tests/fuzz/run.sh 600      # the long run
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:-10}
BUILD=${FENCEPOST_FUZZ_BUILD_DIR:-build-fuzz}
scripts/deps.sh fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFENCEPOST_BUILD_TESTS=OFF \
  -DFENCEPOST_FUZZ=ON >/dev/null
cmake --build "$BUILD" --target fuzz_token fuzz_key fuzz_target fuzz_request
for target in token key target request; do
  corpus=$BUILD/corpus-$target
  rm -rf "$corpus"
  cp -r "tests/fuzz/corpus/$target" "$corpus"
  log=$BUILD/fuzz_$target.log
  if ! (cd "$BUILD" && "./tests/fuzz/fuzz_$target" -max_total_time="$SECONDS_EACH" \
        -timeout=10 -rss_limit_mb=4096 "corpus-$target" >"fuzz_$target.log" 2>&1); then
    tail -40 "$log" >&2
    echo "fuzz_$target: CRASH (input saved in $BUILD)" >&2
    exit 1
  fi
  runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -1 || true)
  echo "fuzz_$target: ${runs:-?} in ${SECONDS_EACH}s, no crash"
done
