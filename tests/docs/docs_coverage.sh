#!/usr/bin/env bash
# Checks that the documentation keeps up with the binary:
#  - every --flag printed by `fencepost --help` appears in docs/*.md;
#  - every metric family a live server's /metrics declares (its `# TYPE`
#    lines) appears in docs/*.md;
#  - README.md and docs/*.md link only inside the repository: no link to
#    another site (only http://127.0.0.1 and http://localhost), none that
#    leaves the repository root, none names ../shared or SPEC.md, and every
#    relative link points at a file or folder that exists.
# Prints what is missing and exits 1 if anything is.
#   docs_coverage.sh FENCEPOST_BINARY
set -euo pipefail

binary=${1:?usage: docs_coverage.sh FENCEPOST_BINARY}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
command -v curl >/dev/null || { echo "curl is required" >&2; exit 1; }

# The server must start with its defaults, whatever the caller's settings.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^FENCEPOST_' || true)

work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-docs.XXXXXX")
pid=
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

docs=(docs/*.md)
missing=()

# True when $1 occurs in the docs as a whole token: not preceded or followed
# by a character that could continue it (so --listen is not found inside
# --admin-listen, nor fencepost_connections inside
# fencepost_connections_shed_total).
documented() {
  grep -qE -- "(^|[^A-Za-z0-9_-])$1([^A-Za-z0-9_-]|\$)" "${docs[@]}"
}

# 1. Flags of --help.
"$binary" --help >"$work/help"
flags=$(grep -oE -- '--[a-z][a-z0-9-]*' "$work/help" | sort -u)
[[ -n $flags ]] || { echo "no flags found in '$binary --help'" >&2; exit 1; }
for flag in $flags; do
  documented "$flag" || missing+=("flag $flag (from --help)")
done

# 2. Metric families of a live /metrics.
"$binary" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --data-dir "$work/d" 2>"$work/log" &
pid=$!
admin=
for _ in $(seq 200); do
  admin=$(sed -nE 's/.* listening .*event=started.* admin=([^ ]+).*/\1/p' "$work/log")
  [[ -n $admin ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [[ -z $admin ]]; then
  echo "the server did not start; its log:" >&2
  cat "$work/log" >&2
  exit 1
fi
# The first scrape is itself counted, so the second also declares the
# request counter families.
curl -fsS "http://$admin/metrics" >/dev/null
curl -fsS "http://$admin/metrics" >"$work/metrics"
families=$(sed -nE 's/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) .*/\1/p' "$work/metrics" | sort -u)
[[ -n $families ]] || { echo "no metric families in /metrics" >&2; exit 1; }
for family in $families; do
  documented "$family" || missing+=("metric $family (from /metrics)")
done

# 3. Links stay inside the repository.
for file in README.md "${docs[@]}"; do
  if grep -nE '\.\./shared|SPEC\.md' "$file" >"$work/hits"; then
    while IFS= read -r hit; do
      missing+=("$file:${hit%%:*} names ../shared or SPEC.md")
    done <"$work/hits"
  fi
  dir=$(dirname "$file")
  # Inline links outside code: fenced blocks and code spans dropped.
  prose=$(awk '/^[[:space:]]*```/ { code = !code; next } !code' "$file" |
    sed -E 's/`[^`]*`//g')
  targets=$(grep -oE '\]\([^)[:space:]]+' <<<"$prose" | cut -c3- || true)
  # A bare address of a site in prose is a link too (autolinked when
  # shown); a placeholder address in capitals, in a code span broken
  # over two lines, is not.
  for url in $(grep -oE '(https?|ftp)://[a-z0-9-]+(\.[a-z0-9-]+)+' <<<"$prose" || true); do
    case $url in
      http://127.0.0.1) ;;
      *) missing+=("$file links outside the repository: $url") ;;
    esac
  done
  for target in $targets; do
    case $target in
      http://127.0.0.1[:/]* | http://localhost[:/]* | '#'*) continue ;;
      *://* | mailto:* | //*)
        missing+=("$file links outside the repository: $target")
        continue
        ;;
    esac
    path=${target%%#*}
    resolved=$(realpath -m "$dir/$path")
    if [[ $resolved != "$root" && $resolved != "$root"/* ]]; then
      missing+=("$file links outside the repository: $target")
    elif [[ ! -e $resolved ]]; then
      missing+=("$file links to $target, which does not exist")
    fi
  done
done

if ((${#missing[@]} > 0)); then
  echo "The documentation is missing:"
  printf '%s\n' "${missing[@]}" | awk '!seen[$0]++ { print "  " $0 }'
  exit 1
fi
echo "docs/ covers $(wc -w <<<"$flags") flags and $(wc -w <<<"$families") metric families; every link stays inside the repository"
