#!/usr/bin/env bash
# Checks deploy/systemd/fencepost.service with systemd-analyze: the unit
# verifies (with ExecStart pointed at the built binary, which must exist),
# and its offline security exposure stays at or below THRESHOLD (0-100;
# systemd prints it as 0.0-10.0).
#   systemd_unit.sh FENCEPOST_BINARY [THRESHOLD]
set -euo pipefail
binary=$1
threshold=${2:-20}
unit=$(cd "$(dirname "$0")/../../deploy/systemd" && pwd)/fencepost.service
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s|^ExecStart=/usr/local/bin/fencepost|ExecStart=$binary|" "$unit" \
  >"$work/fencepost.service"
systemd-analyze verify "$work/fencepost.service"
systemd-analyze security --offline=true --threshold="$threshold" \
  "$work/fencepost.service" | tail -3
