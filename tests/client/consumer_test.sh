#!/bin/sh
# Installs the client component of a build into a temporary prefix, then
# configures, builds and runs tests/client/consumer against it with
# find_package(fencepost CONFIG REQUIRED), as a user's project would, the
# prefix given as the README says (CMAKE_PREFIX_PATH). It also builds the
# README's C++ snippet as it is: the cpp block after the README's marker
# comment.
#
# Usage: consumer_test.sh BUILD_DIR SOURCE_DIR CXX_COMPILER [LINK_FLAGS]
set -eu
build=$1
source=$2
cxx=$3
link_flags=${4:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" --component client
test -f "$tmp/prefix/include/fencepost/client/client.h"
find "$tmp/prefix" -name fencepostConfig.cmake | grep -q .
find "$tmp/prefix" -name libfencepost_client.a | grep -q .
# Only the client: none of the server's headers or libraries.
if [ -e "$tmp/prefix/include/proxy" ] || [ -e "$tmp/prefix/include/fence" ]; then
  echo "the client component installed server headers" >&2
  exit 1
fi

# The README's snippet, byte for byte.
awk '/consumer_test.sh compiles the next cpp block/ { marked = 1; next }
     marked && /^```cpp$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside { print }' "$source/README.md" >"$tmp/readme_snippet.cc"
if [ ! -s "$tmp/readme_snippet.cc" ]; then
  echo "README.md has no marked cpp snippet" >&2
  exit 1
fi

generator=
if command -v ninja >/dev/null 2>&1; then generator="-G Ninja"; fi
# shellcheck disable=SC2086
cmake -S "$source/tests/client/consumer" -B "$tmp/build" $generator \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DFENCEPOST_README_SNIPPET="$tmp/readme_snippet.cc" \
  -DCMAKE_EXE_LINKER_FLAGS="$link_flags"
cmake --build "$tmp/build"
"$tmp/build/consumer"
