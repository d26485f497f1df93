#!/usr/bin/env bash
# Fails when a library folder includes a project header from a folder that is
# not below it (docs/contributing.md, "Layout"). The layers, bottom first:
#
#   codec/    nothing of ours (the standard library only)
#   http/     codec/ (JSON, base64; Beast otherwise)
#   sigv4/    codec/ (hex, percent; OpenSSL's libcrypto otherwise)
#   s3/       sigv4/, codec/ (S3's protocol as strings: addressing, signed
#             requests, object keys and fields, error documents, XML,
#             listings; no HTTP library, so that cli/ shares it)
#   fence/    codec/ (UTF-8, key spelling; LMDB otherwise)
#   metrics/  nothing of ours (prometheus-cpp only)
#   storage/  http/, s3/, sigv4/, fence/, codec/
#   proxy/    http/, s3/, sigv4/, fence/, storage/, metrics/, codec/; the
#             `fencepost` executable's own sources (main.cc,
#             test_switches_main.cc, entry.*) also cli/
#   cli/      client/, s3/, sigv4/ (the client commands of the `fencepost`
#             binary; s3/ addresses and signs `probe s3://`'s requests,
#             sigv4/ finds its credentials)
#   client/   codec/, nothing of the server's (it is installed on its own)
#   examples/ client/
#
# The build refuses most of this by itself (fencepost_layer gives each
# library only its own folder and those of what it links): this check also
# covers what no compile sees, such as a header that only a higher layer
# includes, and refuses a quoted include that climbs out with "../".
#
# tests/ may include anything. Usage: check_includes.sh REPOSITORY_ROOT
set -euo pipefail
root=${1:?usage: check_includes.sh REPOSITORY_ROOT}
cd "$root"

# The project folders a folder may include from, itself included.
allowed() {
  case $1 in
    codec) echo "codec" ;;
    http) echo "http codec" ;;
    sigv4) echo "sigv4 codec" ;;
    s3) echo "s3 sigv4 codec" ;;
    fence) echo "fence codec" ;;
    metrics) echo "metrics" ;;
    storage) echo "storage http s3 sigv4 fence codec" ;;
    proxy) echo "proxy http s3 sigv4 fence storage metrics codec" ;;
    proxy-executable) echo "proxy http s3 sigv4 fence storage metrics codec cli" ;;
    cli) echo "cli client s3 sigv4 codec" ;;
    client) echo "client codec" ;;
    examples) echo "examples client" ;;
  esac
}

projects="codec http sigv4 s3 fence metrics storage proxy cli client examples tests"
status=0
checked=0
for folder in codec http sigv4 s3 fence metrics storage proxy cli client examples; do
  [ -d "$folder" ] || continue
  while IFS= read -r -d '' file; do
    layer=$folder
    case $file in
      proxy/main.cc | proxy/test_switches_main.cc | proxy/entry.*)
        layer=proxy-executable ;;
    esac
    ok=" $(allowed "$layer") "
    while IFS= read -r included; do
      top=${included%%/*}
      if [ "$top" = .. ]; then
        echo "$file includes \"$included\": name a project header from" \
          "the root (\"FOLDER/NAME.h\"), not with ../" >&2
        status=1
        continue
      fi
      # Only the project's own folders; other quoted includes are not ours.
      case " $projects " in *" $top "*) ;; *) continue ;; esac
      checked=$((checked + 1))
      case $ok in
        *" $top "*) ;;
        *)
          echo "$file includes \"$included\": $folder/ may include only" \
            "$(allowed "$layer" | sed 's/[a-z0-9_]\+/&\//g')" >&2
          status=1
          ;;
      esac
    done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$file")
  done < <(find "$folder" -type f \( -name '*.h' -o -name '*.cc' \) -print0)
done

if [ "$checked" -eq 0 ]; then
  echo "no project includes found under $root: wrong root?" >&2
  exit 1
fi
[ "$status" -eq 0 ] && echo "$checked includes follow the layers"
exit "$status"
