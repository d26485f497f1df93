#!/usr/bin/env bash
# Large objects through fencepost's S3 front door, sent by Debian's real
# clients (awscli 2.9, python3-boto3 1.26, rclone 1.60, s3cmd 2.3) as they
# send them above a few MiB: multipart uploads, the token as each tool
# sends it (docs/s3.md's "The four clients"), in front of a real Ceph RGW
# (rgw.sh). Each object is read back straight from RGW with the store's
# credentials and compared byte for byte, its x-amz-meta-fencing-token
# checked. Then a stale leader: once the fence is bumped past its token,
# `aws s3 cp` fails with StaleFencingToken, whether the bump came before
# its upload started or while its parts were on the way, and leaves
# neither an object change nor an upload at RGW.
#
# Clients run in a clean environment (HOME empty, PATH /usr/bin:/bin, none
# of the store's credentials), every command under `timeout`.
#
#   FENCEPOST=build/proxy/fencepost tests/coordination/s3_large.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fencepost=$(realpath "${FENCEPOST:?FENCEPOST: the fencepost binary}")
key_id=large-client
secret=large-client-secret-0123456789abcdef

work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-s3-large.XXXXXX")
run=$work/run # the clients' working directory
mkdir -p "$run" "$work/home"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  "$here/rgw.sh" stop "$work/rgw" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "${0##*/}: $*" >&2
  if [[ -s $work/fencepost.log ]]; then
    echo "--- fencepost's log (its last lines):" >&2
    tail -n 15 "$work/fencepost.log" >&2
  fi
  exit 1
}

# The server starts with its defaults, whatever the caller's settings.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^FENCEPOST_' || true)

"$here/rgw.sh" start "$work/rgw" "$$" >"$work/rgw.log" 2>&1 ||
  { cat "$work/rgw.log" >&2; fail "the RGW did not start"; }
set -a
. "$work/rgw/env"
set +a

# fencepost: the front door over s3://BUCKET/large (rclone signs no
# payload: --s3-allow-unsigned-payload).
printf '%s %s\n' "$key_id" "$secret" >"$work/clients"
chmod 600 "$work/clients"
timeout 300 "$fencepost" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --data-dir "$work/data" --backend "s3://$S3_BUCKET/large" \
  --s3-endpoint "$S3_ENDPOINT" --s3-listen 127.0.0.1:0 \
  --s3-client-credentials "$work/clients" --s3-allow-unsigned-payload \
  >"$work/fencepost.log" 2>&1 &
pids+=($!)
door= admin=
for _ in $(seq 300); do
  door=$(sed -nE 's/.*event=s3_started.* s3=([^ ]+).*/\1/p' "$work/fencepost.log" | head -n 1)
  admin=$(sed -nE 's/.*event=started.* admin=([^ ]+).*/\1/p' "$work/fencepost.log" | head -n 1)
  [[ -n $door && -n $admin ]] && break
  kill -0 "${pids[-1]}" 2>/dev/null || break
  sleep 0.1
done
[[ -n $door && -n $admin ]] || { cat "$work/fencepost.log" >&2; fail "fencepost did not start"; }

cat >"$run/s3cfg" <<EOF
[default]
access_key = $key_id
secret_key = $secret
host_base = $door
host_bucket = $door
use_https = False
signature_v2 = False
bucket_location = us-east-1
EOF
cat >"$run/rclone.conf" <<EOF
[door]
type = s3
provider = Other
access_key_id = $key_id
secret_access_key = $secret
endpoint = http://$door
force_path_style = true
no_check_bucket = true
EOF
cat >"$run/upload.py" <<EOF
import boto3, sys
s3 = boto3.client("s3", endpoint_url="http://$door", region_name="us-east-1",
                  aws_access_key_id="$key_id", aws_secret_access_key="$secret")
s3.upload_file(sys.argv[1], "$S3_BUCKET", sys.argv[2],
               ExtraArgs={"Metadata": {"fencing-token": sys.argv[3]}})
EOF

# client SECONDS CMD [OUT]: CMD in the clients' directory with a clean
# environment and the door's key, bounded; its output in OUT ($work/out).
client() {
  local seconds=$1 out=${3:-$work/out}
  (cd "$run" && exec env -i HOME="$work/home" PATH=/usr/bin:/bin LANG=C.UTF-8 \
    AWS_ACCESS_KEY_ID="$key_id" AWS_SECRET_ACCESS_KEY="$secret" \
    AWS_DEFAULT_REGION=us-east-1 timeout "$seconds" bash -c "$2") >"$out" 2>&1
}

# rgw get KEY FILE | rgw uploads PREFIX | rgw await-upload PREFIX: the
# store's own view, with its credentials (boto3 straight to RGW, no
# retries), bounded. get writes the object's bytes to FILE and prints its
# fencing-token and ETag; uploads prints how many multipart uploads RGW has
# under PREFIX; await-upload waits for one, then prints how many.
rgw() {
  timeout 120 /usr/bin/python3 - "$@" <<'PY'
import os, sys
import boto3, botocore.config
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"],
                  region_name=os.environ["S3_REGION"],
                  config=botocore.config.Config(
                      s3={"addressing_style": "path"},
                      retries={"total_max_attempts": 1}))
bucket = os.environ["S3_BUCKET"]
what, key = sys.argv[1], sys.argv[2]
if what == "get":
    got = s3.get_object(Bucket=bucket, Key=key)
    with open(sys.argv[3], "wb") as out:
        for piece in got["Body"].iter_chunks(1 << 20):
            out.write(piece)
    print(got["Metadata"].get("fencing-token", "-"), got["ETag"])
elif what == "uploads":
    listed = s3.list_multipart_uploads(Bucket=bucket, Prefix=key)
    print(len(listed.get("Uploads", [])))
elif what == "await-upload":  # until an upload is under KEY (60 s at most)
    import time
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listed = s3.list_multipart_uploads(Bucket=bucket, Prefix=key)
        if listed.get("Uploads"):
            print(len(listed["Uploads"]))
            break
        time.sleep(0.02)
    else:
        print(0)
PY
}

# holds KEY FILE TOKEN: RGW holds FILE's bytes at large/KEY, with TOKEN,
# and no upload of it.
holds() {
  local got
  got=$(rgw get "large/$1" "$work/got") || fail "reading large/$1 from RGW failed"
  cmp -s "$work/got" "$run/$2" || fail "RGW's large/$1 is not $2's bytes"
  [[ ${got%% *} == "$3" ]] || fail "RGW's large/$1 has fencing-token ${got%% *}, not $3"
  [[ $(rgw uploads "large/$1") == 0 ]] || fail "an upload of large/$1 is left at RGW"
  echo "ok: RGW holds large/$1: $2's bytes, fencing-token $3, ETag ${got#* }"
}

# timed NAME SECONDS CMD: CMD must succeed; how long it took is printed.
timed() {
  local start end
  start=$(date +%s%N)
  client "$2" "$3" || { cat "$work/out" >&2; fail "$1 failed"; }
  end=$(date +%s%N)
  echo "ok: $1 in $(((end - start) / 1000000)) ms"
}

for size in 20 30 50 100; do
  head -c "${size}M" /dev/urandom >"$run/f$size"
done
bucket=$S3_BUCKET
to_door="--endpoint-url http://$door --no-progress"
timed "aws s3 cp of 20 MiB" 60 "aws s3 cp f20 s3://$bucket/aws20 $to_door --metadata fencing-token=5"
holds aws20 f20 5
timed "aws s3 cp of 100 MiB" 90 "aws s3 cp f100 s3://$bucket/aws100 $to_door --metadata fencing-token=5"
holds aws100 f100 5
timed "boto3 upload_file of 30 MiB" 60 "python3 upload.py f30 boto30 5"
holds boto30 f30 5
timed "rclone copyto of 50 MiB" 60 "rclone --config rclone.conf copyto --no-check-dest --retries 1 --s3-upload-cutoff 10M --header-upload 'X-Amz-Meta-Fencing-Token: 5' f50 door:$bucket/rclone50"
holds rclone50 f50 5
timed "s3cmd put of 50 MiB" 60 "s3cmd -c s3cfg put --add-header=x-amz-meta-fencing-token:5 f50 s3://$bucket/s3cmd50"
holds s3cmd50 f50 5

# bump KEY TOKEN: the fence raised on the admin port, as a new leader does.
bump() {
  timeout 10 /usr/bin/curl -sS -f -o /dev/null -X PUT -H "Fencing-Token: $2" \
    "http://$admin/v1/fences/$1" || fail "bumping $1 to $2 failed"
}

# stale NAME: the last client's output says StaleFencingToken.
stale() {
  grep -q StaleFencingToken "$work/out" ||
    { cat "$work/out" >&2; fail "the stale aws s3 cp ($1) did not fail with StaleFencingToken"; }
  echo "ok: stale $1: $(grep -o 'StaleFencingToken.*' "$work/out" | head -n 1)"
}

# The stale leader, bumped before its upload: refused at
# CreateMultipartUpload.
bump aws20 6
if client 60 "aws s3 cp f100 s3://$bucket/aws20 $to_door --metadata fencing-token=5"; then
  fail "a stale aws s3 cp was taken"
fi
stale "before its upload"
holds aws20 f20 5

# The stale leader, bumped while its parts are on the way (its bandwidth
# bounded, so that they take seconds): refused at a part or at
# CompleteMultipartUpload.
printf '[default]\ns3 =\n  max_bandwidth = 25MB/s\n' >"$run/slow.cfg"
status=0
client 90 "AWS_CONFIG_FILE=slow.cfg aws s3 cp f100 s3://$bucket/aws100 $to_door --metadata fencing-token=5" &
late=$!
[[ $(rgw await-upload large/aws100) == 1 ]] || fail "the late upload never started at RGW"
bump aws100 6
wait "$late" || status=$?
((status != 0)) || fail "a stale aws s3 cp was taken after the bump"
stale "while uploading"
holds aws100 f100 5
echo "ok"
