#!/usr/bin/env bash
# The public faces of storage/ and proxy/: nothing of proxy/ and no header
# of storage/ reaches the LMDB engine, directly or through the headers it
# includes. The closure of each such file's quoted project includes must
# name neither <lmdb.h> nor the engine's headers (fence/committer.h,
# fence/applier.h, fence/recovery.h, fence/env.h, fence/shards.h,
# fence/values.h, fence/fence_store.h, fence/long_keys.h), and proxy/'s
# also not storage/'s adapters of the engine (storage/local_fences.h,
# storage/lmdb_backend.h): the engine is opened through
# storage/local_engine.h alone, and the stores through Fences and Backend;
# storage's adapters hold the engine through declarations only. Prints the
# chain of includes of each file that breaks it.
#
# Usage: check_faces.sh REPOSITORY_ROOT
set -euo pipefail
root=${1:?usage: check_faces.sh REPOSITORY_ROOT}
cd "$root"

core=" fence/committer.h fence/applier.h fence/recovery.h fence/env.h \
fence/shards.h fence/values.h fence/fence_store.h fence/long_keys.h "
engine="$core storage/local_fences.h storage/lmdb_backend.h "

declare -A via  # a header reached -> the file that included it
status=0
checked=0

# reaches FILE: walks FILE's quoted project includes breadth first; prints
# the first chain that reaches the engine or <lmdb.h>, if any.
reaches() {
  local start=$1 file included
  via=()
  local queue=("$start")
  via[$start]=""
  while ((${#queue[@]})); do
    file=${queue[0]}
    queue=("${queue[@]:1}")
    [[ -f $file ]] || continue
    if grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]+<lmdb\.h>' "$file"; then
      chain "$file" "<lmdb.h>"
      return 0
    fi
    while IFS= read -r included; do
      [[ -n ${via[$included]+x} ]] && continue
      via[$included]=$file
      if [[ $engine == *" $included "* ]]; then
        chain "$file" "$included"
        return 0
      fi
      queue+=("$included")
    done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$file")
  done
  return 1
}

chain() {  # FILE WHAT: FILE's chain back to the start, then WHAT
  local file=$1 out=$2
  while [[ -n $file ]]; do
    out="$file -> $out"
    file=${via[$file]}
  done
  echo "$out"
}

while IFS= read -r -d '' file; do
  checked=$((checked + 1))
  if found=$(reaches "$file"); then
    echo "proxy/ reaches the LMDB engine: $found" >&2
    status=1
  fi
done < <(find proxy -type f \( -name '*.h' -o -name '*.cc' \) -print0)

headers=0
engine=$core
while IFS= read -r -d '' file; do
  headers=$((headers + 1))
  if found=$(reaches "$file"); then
    echo "a header of storage/ reaches the LMDB engine: $found" >&2
    status=1
  fi
done < <(find storage -type f -name '*.h' -print0)

if [ "$checked" -eq 0 ] || [ "$headers" -eq 0 ]; then
  echo "no files under $root/proxy or $root/storage: wrong root?" >&2
  exit 1
fi
[ "$status" -eq 0 ] &&
  echo "$checked files of proxy/ and $headers headers of storage/ stay off the LMDB engine"
exit "$status"
