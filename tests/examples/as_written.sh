#!/usr/bin/env bash
# The README's `examples/split_brain.sh enforce`, run as the README writes
# it after scripts/run.sh: from the top of a checkout, with no FENCEPOST in
# the environment and no fencepost on the PATH, the binary only where
# scripts/run.sh builds it (build-release/proxy/fencepost).
#
# Usage: as_written.sh SOURCE_DIR FENCEPOST_BINARY
set -euo pipefail
source=$1
binary=$2

readme=$source/README.md
command=$(sed -n 's/^\$ \(examples\/split_brain\.sh enforce\)$/\1/p' "$readme")
if [ -z "$command" ]; then
  echo "README.md no longer shows '\$ examples/split_brain.sh enforce'" >&2
  exit 1
fi
if ! grep -q 'build-release/proxy/fencepost' "$readme"; then
  echo "README.md does not say where scripts/run.sh leaves the binary" >&2
  exit 1
fi

# A checkout with scripts/run.sh's build in it, and nothing else built.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-as-written.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp -r "$source/examples" "$tmp/examples"
mkdir -p "$tmp/build-release/proxy"
ln -s "$binary" "$tmp/build-release/proxy/fencepost"

# The PATH without any directory that holds a fencepost.
path=
IFS=: read -ra dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
  [ -e "$dir/fencepost" ] || path=${path:+$path:}$dir
done

cd "$tmp"
# shellcheck disable=SC2086  # the command as the README writes it
env -u FENCEPOST PATH="$path" $command
