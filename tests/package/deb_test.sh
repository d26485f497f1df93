#!/usr/bin/env bash
# The Debian packages from install to purge (docs/install.md): builds them
# with cpack from BUILD_DIR, lints them, installs both with dpkg, checks the
# files, the user, the data directory, the unit (systemd-analyze verify, and
# deploy/'s hardening kept), `fencepost --version`, serves under the unit's
# rules (systemctl where systemd is PID 1; elsewhere the installed binary
# as the fencepost user with the unit's environment and umask), builds
# tests/client/consumer against the installed fencepost-dev, then removes
# (only the data directory and the conffile stay) and purges (nothing stays).
#   deb_test.sh BUILD_DIR SOURCE_DIR CXX_COMPILER VERSION
# It refuses to run where a fencepost package, user, data directory or
# settings file already exists: purging would delete that machine's data.
set -euo pipefail
build=$1
source=$2
cxx=$3
version=$4
arch=$(dpkg --print-architecture)

# shellcheck source=../coordination/lib.sh
. "$source/tests/coordination/lib.sh"  # free_port, die

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo -n)
as_root() { "${sudo_cmd[@]}" "$@"; }

package_status() {
  dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null || true
}
installed_before() {
  case $(package_status "$1") in "" | un*) return 1 ;; *) return 0 ;; esac
}

# --- Refuse to touch a fencepost this machine already has.
for p in fencepost fencepost-dev; do
  installed_before "$p" &&
    die "refusing to run: the package $p is on this machine ($(package_status "$p")); purging it would delete its data"
done
for f in /var/lib/fencepost /etc/default/fencepost \
  /lib/systemd/system/fencepost.service /etc/systemd/system/fencepost.service; do
  [ ! -e "$f" ] || die "refusing to run: $f exists on this machine"
done
getent passwd fencepost >/dev/null &&
  die "refusing to run: a user fencepost exists on this machine"
getent group fencepost >/dev/null &&
  die "refusing to run: a group fencepost exists on this machine"
for tool in cpack lintian dpkg-shlibdeps systemd-analyze setpriv curl cmake; do
  command -v "$tool" >/dev/null || die "$tool is missing (scripts/deps.sh installs it)"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-deb.XXXXXX")
installed=0
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    as_root kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "$installed" = 1 ]; then
    as_root dpkg --purge fencepost fencepost-dev >/dev/null 2>&1 ||
      echo "deb_test.sh: cleaning up: dpkg --purge fencepost fencepost-dev failed" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# dpkg ACTION...: dpkg as root, waiting up to a minute for another dpkg or
# apt (of another test, or of the machine) to let go of the lock.
dpkg_do() {
  local try
  for ((try = 0; try < 60; try++)); do
    if as_root dpkg "$@" >"$work/dpkg.log" 2>&1; then return 0; fi
    grep -q 'lock' "$work/dpkg.log" || break
    sleep 1
  done
  cat "$work/dpkg.log" >&2
  die "dpkg $* failed"
}

# What maintainer scripts might leave: every name with fencepost in it
# under the system's directories, dpkg's own database aside, and the data
# directory without its contents.
traces() {
  { find /etc /lib /usr/lib /usr/share /usr/bin /usr/include /var/lib \
    /run/systemd -path /var/lib/dpkg -prune \
    -o -path /var/lib/fencepost -print -prune \
    -o -name '*fencepost*' -print 2>/dev/null || true; } | sort
}
traces >"$work/traces.before"

# --- Build and lint.
cpack --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; die "cpack failed"; }
deb=$work/out/fencepost_${version}_$arch.deb
dev=$work/out/fencepost-dev_${version}_$arch.deb
[ -f "$deb" ] || die "cpack wrote no $(basename "$deb"): $(ls "$work/out")"
[ -f "$dev" ] || die "cpack wrote no $(basename "$dev"): $(ls "$work/out")"
lintian --fail-on error,warning "$deb" "$dev" >"$work/lintian.log" 2>&1 ||
  { cat "$work/lintian.log" >&2; die "lintian reports errors or warnings"; }

# Paths of the packages that did not exist before: all must go on removal.
for p in "$deb" "$dev"; do
  dpkg-deb --fsys-tarfile "$p" | tar -t | sed 's|^\./|/|; s|/$||' | grep -v '^$'
done | sort -u | while read -r path; do
  [ -e "$path" ] || [ -L "$path" ] || echo "$path"
done >"$work/new_paths"

# --- Install.
installed=1
dpkg_do -i "$deb" "$dev"
for p in fencepost fencepost-dev; do
  [ "$(package_status "$p")" = "ii " ] || die "$p is not installed: $(package_status "$p")"
done

for f in /usr/bin/fencepost /lib/systemd/system/fencepost.service \
  /etc/default/fencepost /usr/share/man/man1/fencepost.1.gz \
  /usr/share/doc/fencepost/copyright /usr/share/doc/fencepost/changelog.gz; do
  dpkg -L fencepost | grep -qx "$f" || die "dpkg -L fencepost lacks $f"
done
for f in /usr/include/fencepost/client/client.h \
  /usr/include/fencepost/client/leader_elector.h \
  /usr/share/doc/fencepost-dev/copyright; do
  dpkg -L fencepost-dev | grep -qx "$f" || die "dpkg -L fencepost-dev lacks $f"
done
for f in libfencepost_client.a cmake/fencepost/fencepostConfig.cmake; do
  dpkg -L fencepost-dev | grep -q "/$f\$" || die "dpkg -L fencepost-dev lacks .../$f"
done
dpkg-query -W -f='${Conffiles}' fencepost | grep -q ' /etc/default/fencepost ' ||
  die "/etc/default/fencepost is not a conffile"
grep -q '^#FENCEPOST_LISTEN=' /etc/default/fencepost ||
  die "/etc/default/fencepost lacks the commented FENCEPOST_* settings"
if readelf -S /usr/bin/fencepost | grep -q '\.debug_info\|\.symtab'; then
  die "/usr/bin/fencepost is not stripped"
fi

# --- The user and the data directory.
IFS=: read -r _ _ uid gid _ home shell < <(getent passwd fencepost) ||
  die "postinst made no user fencepost"
getent group fencepost >/dev/null || die "postinst made no group fencepost"
[ "$(getent group "$gid" | cut -d: -f1)" = fencepost ] ||
  die "the user fencepost's group is $gid, not fencepost"
read -r sys_min sys_max < <(awk '$1 == "FIRST_SYSTEM_UID" { a = $2 }
  $1 == "LAST_SYSTEM_UID" { b = $2 } END { print (a ? a : 100), (b ? b : 999) }' \
  FS='=' /etc/adduser.conf 2>/dev/null || echo "100 999")
((uid >= sys_min && uid <= sys_max)) ||
  die "the user fencepost (uid $uid) is not a system user ($sys_min-$sys_max)"
[ "$home" = /var/lib/fencepost ] || die "the user fencepost's home is $home"
case $shell in */nologin | */false) ;; *) die "the user fencepost has the shell $shell" ;; esac
[ "$(stat -c '%U:%G %a' /var/lib/fencepost)" = "fencepost:fencepost 700" ] ||
  die "/var/lib/fencepost is $(stat -c '%U:%G %a' /var/lib/fencepost), not fencepost:fencepost 700"

# --- The unit: it verifies, runs the installed binary as the fencepost
# user, and keeps every other line of deploy/'s unit (the hardening).
unit=/lib/systemd/system/fencepost.service
systemd-analyze verify "$unit" >"$work/verify.log" 2>&1 ||
  { cat "$work/verify.log" >&2; die "systemd-analyze verify $unit failed"; }
grep -qx 'ExecStart=/usr/bin/fencepost serve' "$unit" || die "$unit does not start /usr/bin/fencepost serve"
grep -qx 'User=fencepost' "$unit" || die "$unit has no User=fencepost"
grep -qx 'Group=fencepost' "$unit" || die "$unit has no Group=fencepost"
grep -q '^DynamicUser=' "$unit" && die "$unit still has DynamicUser="
grep -v '^#\|^$\|^ExecStart=\|^DynamicUser=' "$source/deploy/systemd/fencepost.service" |
  while IFS= read -r line; do
    grep -qxF -- "$line" "$unit" || echo "$line"
  done >"$work/lost"
[ ! -s "$work/lost" ] || die "$unit lost lines of deploy's unit: $(cat "$work/lost")"
systemd-analyze security --offline=true --threshold=20 "$unit" >"$work/security.log" 2>&1 ||
  { tail -5 "$work/security.log" >&2; die "$unit's exposure is above 2.0"; }

out=$(/usr/bin/fencepost --version) || die "/usr/bin/fencepost --version failed"
[ "$out" = "fencepost $version" ] || die "/usr/bin/fencepost --version says '$out'"

# --- Serve with the packaged settings, on ports of this test, written to
# /etc/default/fencepost as an operator would.
data=$(free_port)
admin=$(free_port)
printf 'FENCEPOST_LISTEN=127.0.0.1:%s\nFENCEPOST_ADMIN_LISTEN=127.0.0.1:%s\n' \
  "$data" "$admin" | as_root tee -a /etc/default/fencepost >/dev/null
if [ -d /run/systemd/system ]; then
  as_root systemctl restart fencepost || die "systemctl restart fencepost failed"
  systemctl is-active --quiet fencepost || die "fencepost.service is not active"
else
  # No systemd as PID 1: the unit's rules by hand, read from the installed
  # unit. Its user, group and umask; Environment= first, then the
  # EnvironmentFile=, whose settings win, as systemd does.
  unit_values() { sed -n "s/^$1=//p" "$unit"; }
  unit_value() { unit_values "$1" | tail -1; }
  env_args=()
  while IFS= read -r pair; do env_args+=("$pair"); done < <(unit_values Environment)
  env_file=$(unit_value EnvironmentFile)
  env_file=${env_file#-}
  while IFS= read -r pair; do env_args+=("$pair"); done \
    < <(grep -E '^[A-Z_][A-Z0-9_]*=' "$env_file")
  read -r -a exec_start <<<"$(unit_value ExecStart)"
  (cd / && exec "${sudo_cmd[@]}" setpriv --reuid="$(unit_value User)" \
    --regid="$(unit_value Group)" --init-groups --no-new-privs \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${env_args[@]}" \
    sh -c 'umask "$1"; shift; exec "$@"' sh "$(unit_value UMask)" \
    "${exec_start[@]}") >"$work/server.log" 2>&1 &
  server_pid=$!
fi
dir=$work  # die prints $dir/server.log
for ((i = 0; i < 300; i++)); do
  curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$admin/readyz" && break
  [ -z "$server_pid" ] || kill -0 "$server_pid" 2>/dev/null ||
    die "the installed fencepost exited"
  sleep 0.1
done
curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$admin/readyz" ||
  die "the installed fencepost is not ready on 127.0.0.1:$admin"
user=$(ps -o user= -p "$(pgrep -x -u fencepost fencepost | head -1)" 2>/dev/null || true)
[ "$user" = fencepost ] || die "no fencepost process runs as the user fencepost"
put() {
  curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Fencing-Token: $1" \
    --data "v$1" "http://127.0.0.1:$data/package-test"
}
code=$(put 7)
case $code in 200 | 201) ;; *) die "PUT with token 7: $code" ;; esac
code=$(put 6)
[ "$code" = 409 ] || die "PUT with the stale token 6: $code, not 409"
body=$(curl -sf "http://127.0.0.1:$data/package-test") || die "GET package-test failed"
[ "$body" = v7 ] || die "GET package-test: '$body', not v7"
strangers=$(as_root find /var/lib/fencepost ! -user fencepost)
[ -z "$strangers" ] || die "files in /var/lib/fencepost not owned by fencepost: $strangers"
if [ -n "$server_pid" ]; then
  as_root kill -TERM "$(pgrep -x -u fencepost fencepost)" ||
    die "could not stop the installed fencepost"
  wait "$server_pid" || die "the installed fencepost exited with $? on SIGTERM"
  server_pid=
fi

# --- A project of its own built against the installed fencepost-dev.
cmake -S "$source/tests/client/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH=/usr >"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log" >&2; die "the consumer project does not configure against /usr"; }
found=$(sed -n 's/^fencepost_DIR:PATH=//p' "$work/consumer/CMakeCache.txt")
dpkg -S "$found/fencepostConfig.cmake" 2>/dev/null | grep -q '^fencepost-dev:' ||
  die "the consumer found fencepost in $found, not in fencepost-dev's files"
cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 ||
  { tail -40 "$work/consumer.log" >&2; die "the consumer project does not build against /usr"; }
"$work/consumer/consumer" || die "the consumer program failed"

# --- Remove: only the data directory and the conffile stay.
dpkg_do -r fencepost fencepost-dev
[ "$(package_status fencepost)" = "rc " ] ||
  die "after dpkg -r, fencepost is '$(package_status fencepost)', not rc (conffiles left)"
installed_before fencepost-dev && die "after dpkg -r, fencepost-dev is '$(package_status fencepost-dev)'"
while read -r path; do
  case $path in /etc/default/fencepost | /etc/default) continue ;; esac
  if [ -e "$path" ] || [ -L "$path" ]; then echo "$path"; fi
done <"$work/new_paths" >"$work/left"
[ ! -s "$work/left" ] || die "dpkg -r left files of the packages: $(cat "$work/left")"
traces >"$work/traces.removed"
comm -13 "$work/traces.before" "$work/traces.removed" >"$work/left"
[ "$(cat "$work/left")" = "$(printf '/etc/default/fencepost\n/var/lib/fencepost')" ] ||
  die "after dpkg -r, new paths should be /etc/default/fencepost and /var/lib/fencepost, not: $(cat "$work/left")"
pgrep -u fencepost >/dev/null && die "processes of the user fencepost run after dpkg -r"
[ -d /var/lib/fencepost ] || die "dpkg -r removed /var/lib/fencepost"

# --- Purge: nothing stays.
dpkg_do --purge fencepost fencepost-dev
installed=0
installed_before fencepost && die "after dpkg --purge, fencepost is '$(package_status fencepost)'"
[ ! -e /var/lib/fencepost ] || die "dpkg --purge left /var/lib/fencepost"
[ ! -e /etc/default/fencepost ] || die "dpkg --purge left /etc/default/fencepost"
getent passwd fencepost >/dev/null && die "dpkg --purge left the user fencepost"
getent group fencepost >/dev/null && die "dpkg --purge left the group fencepost"
traces >"$work/traces.purged"
comm -13 "$work/traces.before" "$work/traces.purged" >"$work/left"
[ ! -s "$work/left" ] || die "dpkg --purge left: $(cat "$work/left")"
echo "deb_test.sh: $(basename "$deb") and $(basename "$dev") install, serve and remove cleanly"
