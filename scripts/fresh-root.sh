#!/usr/bin/env bash
# Proves the test command's own set-up: makes a clean Debian 12 root with
# debootstrap (the minimal variant: only what Debian calls essential), puts
# a fresh `git clone` of this repository's HEAD in it, and runs
# scripts/test.sh there under chroot. Every package a test or an example
# needs must then come from scripts/deps.sh, as on a new machine.
#
#   sudo scripts/fresh-root.sh [--reuse] [--optimized-only] [ROOT]
#
# ROOT is a directory outside the checkout (default /var/tmp/fencepost-root).
#   --reuse           keep the root ROOT already holds (no debootstrap; the
#                     packages deps.sh installed stay); the clone is new.
#   --optimized-only  only the optimized pass (FENCEPOST_SANITIZERS=0).
# FENCEPOST_MIRROR names the Debian mirror (default deb.debian.org).
#
# The mounts the tests need (/proc, /sys, /dev with /dev/fuse and /dev/pts,
# a tmpfs /dev/shm) are made in a mount namespace of this script's own, so
# nothing of them is seen outside it, and unmounted on exit. Package
# scripts start no service in the root (policy-rc.d): a postgres or etcd
# started by apt would hold the ports the tests expect free. The tests run
# as root, with an environment of only PATH, HOME, LANG and the options
# above (nothing of the caller's, no FENCEPOST_*).
set -euo pipefail
checkout=$(cd "$(dirname "$0")/.." && pwd)
root=/var/tmp/fencepost-root
reuse=0
sanitizers=1
while [ $# -gt 0 ]; do
  case $1 in
    --reuse) reuse=1 ;;
    --optimized-only) sanitizers=0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
    -*) echo "unknown option $1 (see --help)" >&2 && exit 2 ;;
    *) root=$1 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-root.sh needs root (debootstrap, chroot, mount)" >&2; exit 2; }
case $(realpath -m "$root")/ in
  "$checkout"/*) echo "the root must be outside the checkout: $root" >&2 && exit 2 ;;
  / | /usr/* | /etc/* | /home/ | /var/ | /var/tmp/) echo "refusing the root $root" >&2 && exit 2 ;;
esac
mirror=${FENCEPOST_MIRROR:-http://deb.debian.org/debian}
started=$SECONDS
say() { echo "== fresh-root: $* (at $(((SECONDS - started) / 60))m$(((SECONDS - started) % 60))s)"; }

# The rest runs in a private mount namespace (see above).
if [ -z "${FENCEPOST_FRESH_ROOT_NS:-}" ]; then
  command -v unshare >/dev/null || { echo "unshare (util-linux) is missing" >&2; exit 2; }
  args=()
  [ "$reuse" = 1 ] && args+=(--reuse)
  [ "$sanitizers" = 0 ] && args+=(--optimized-only)
  exec env FENCEPOST_FRESH_ROOT_NS=1 unshare --mount --propagation private \
    "$0" "${args[@]}" "$root"
fi

if [ "$reuse" = 0 ] || [ ! -x "$root/usr/bin/apt-get" ]; then
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  if [ -e "$root" ]; then
    say "removing the old root $root"
    rm -rf --one-file-system "$root"
  fi
  say "debootstrap bookworm into $root"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || {
    tail -20 "$root.debootstrap.log" >&2
    exit 1
  }
fi

# What a machine has that debootstrap does not set up.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
grep -qs '^127\.0\.0\.1.*localhost' "$root/etc/hosts" ||
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >>"$root/etc/hosts"
cp /etc/resolv.conf "$root/etc/resolv.conf"
chmod 1777 "$root/tmp"

unmount() {
  local m
  for m in dev/shm dev/pts dev sys proc; do
    mountpoint -q "$root/$m" && umount -l "$root/$m" || true
  done
}
trap unmount EXIT
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount -t tmpfs -o mode=1777 shm "$root/dev/shm"

say "a fresh clone of $(git -C "$checkout" rev-parse --short HEAD)"
rm -rf --one-file-system "$root/src/fencepost"
mkdir -p "$root/src"
git clone --quiet --no-hardlinks "$checkout" "$root/src/fencepost"

say "scripts/test.sh in the root (FENCEPOST_SANITIZERS=$sanitizers)"
status=0
chroot "$root" /usr/bin/env -i \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 TERM=dumb FENCEPOST_SANITIZERS="$sanitizers" \
  /bin/bash -c 'cd /src/fencepost && scripts/test.sh' || status=$?
say "scripts/test.sh exited $status"
exit "$status"
