#!/usr/bin/env bash
# Installs the Debian 12 packages fencepost builds and tests with, if missing.
#   scripts/deps.sh          # everything the tests need (scripts/test.sh)
#   scripts/deps.sh build    # only what building the server needs (run.sh)
#   scripts/deps.sh fuzz     # the tests' packages and clang (tests/fuzz/run.sh)
#   scripts/deps.sh examples # what examples/*.sh run and build with
# Every program a test or an example runs comes from here (checked in a clean
# Debian 12 root by scripts/fresh-root.sh): procps (ps, pgrep), etcdctl
# (etcd-client; etcd-server lacks it), python3 with yaml, fusepy and kazoo, ...
# An entry PACKAGE@COMMAND is skipped when COMMAND is already on the PATH from
# another package (kubectl, say, which several packages ship).
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev liblmdb-dev prometheus-cpp-dev libspdlog-dev libfmt-dev
  libssl-dev libzookeeper-mt-dev libpq-dev libjemalloc-dev liburing-dev
)
if [ "${1:-}" = fuzz ]; then
  packages+=(clang-14 libclang-rt-14-dev)
fi
if [ "${1:-}" = examples ]; then
  packages+=(curl procps python3 etcd-server@etcd)
elif [ "${1:-}" != build ]; then
  packages+=(
    libgtest-dev libbenchmark-dev lmdb-utils
    curl openssl wrk nginx strace procps python3 python3-yaml
    python3-pytest mypy python3-venv python3-pip
    lintian dpkg-dev fakeroot adduser
    python3-fusepy fuse@fusermount
    prometheus@promtool yamllint@yamllint systemd@systemd-analyze
    kubernetes-client@kubectl
    etcd-server etcd-client@etcdctl zookeeperd python3-kazoo postgresql-15
    ceph-mon ceph-osd radosgw ceph-common
    python3-boto3 s3cmd rclone awscli
  )
fi
missing=()
for entry in "${packages[@]}"; do
  p=${entry%@*}
  if [ "$entry" != "$p" ] && command -v "${entry#*@}" >/dev/null 2>&1; then
    continue
  fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
