#!/usr/bin/env bash
# No image registry is reachable here, so this proves the runtime stage's
# package list instead: every shared library the built binary loads (ldd)
# belongs (dpkg -S) to a package named in RUNTIME_PACKAGES of
# deploy/container/Containerfile, and the binary runs.
#   container_runtime.sh FENCEPOST_BINARY
set -euo pipefail
binary=$1
file=$(dirname "$0")/../../deploy/container/Containerfile
packages=$(sed -n 's/^ARG RUNTIME_PACKAGES="\(.*\)"/\1/p' "$file")
[ -n "$packages" ] || { echo "no RUNTIME_PACKAGES in $file" >&2; exit 1; }
missing=0
while read -r lib; do
  owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null || true)
  owner=${owner%%:*}
  if [ -z "$owner" ]; then
    echo "no Debian package owns $lib" >&2
    missing=1
  elif ! grep -qw -- "$owner" <<<"$packages"; then
    echo "$lib comes from $owner, which RUNTIME_PACKAGES lacks" >&2
    missing=1
  else
    echo "$lib: $owner"
  fi
done < <(ldd "$binary" | awk '/=>/ { print $3 }')
if ldd "$binary" | grep -q "not found"; then
  echo "unresolved libraries" >&2
  exit 1
fi
[ "$missing" -eq 0 ]
"$binary" --version
