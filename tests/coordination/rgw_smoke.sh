#!/usr/bin/env bash
# The real S3 store of the tests works: rgw.sh starts a one-node Ceph RGW,
# s3cmd (an independent client) puts an object with a metadata header, reads
# it back byte for byte with its metadata, deletes it, and rgw.sh stops the
# cluster and leaves nothing behind.
set -euo pipefail
here=$(dirname "$0")
work=$(mktemp -d)
dir=$work/rgw
trap '"$here/rgw.sh" stop "$dir"; rm -rf "$work"' EXIT

fail() {
  echo "${0##*/}: $*" >&2
  exit 1
}

"$here/rgw.sh" start "$dir" >/dev/null
set -a
. "$dir/env"
set +a

# Path-style addressing: no %(bucket)s in host_bucket.
cat >"$work/s3cfg" <<CFG
[default]
access_key = $AWS_ACCESS_KEY_ID
secret_key = $AWS_SECRET_ACCESS_KEY
host_base = ${S3_ENDPOINT#http://}
host_bucket = ${S3_ENDPOINT#http://}
use_https = False
signature_v2 = False
bucket_location = $S3_REGION
CFG
s3() {
  timeout 60 s3cmd -c "$work/s3cfg" --no-progress "$@"
}

head -c 70000 /dev/urandom >"$work/put"
s3 put --add-header=x-amz-meta-fencing-token:33 "$work/put" \
  "s3://$S3_BUCKET/smoke/key one" >/dev/null || fail "s3cmd put failed"
s3 get --force "s3://$S3_BUCKET/smoke/key one" "$work/got" >/dev/null ||
  fail "s3cmd get failed"
cmp "$work/put" "$work/got" || fail "the object read back differs from the one put"
info=$(s3 info "s3://$S3_BUCKET/smoke/key one") || fail "s3cmd info failed"
grep -q 'x-amz-meta-fencing-token: 33' <<<"$info" ||
  fail "the object's metadata lacks the token: $info"
s3 del "s3://$S3_BUCKET/smoke/key one" >/dev/null || fail "s3cmd del failed"
if s3 info "s3://$S3_BUCKET/smoke/key one" >/dev/null 2>&1; then
  fail "the object is still there after its delete"
fi

pids=$(cat "$dir"/run/*.daemon)
"$here/rgw.sh" stop "$dir"
for pid in $pids; do
  kill -0 "$pid" 2>/dev/null && fail "process $pid still runs after rgw.sh stop"
done
[[ ! -e $dir ]] || fail "rgw.sh stop left $dir"
echo "ok"
