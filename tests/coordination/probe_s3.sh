#!/usr/bin/env bash
# `fencepost probe s3://BUCKET/PREFIX` against a real Ceph RGW 16.2 (rgw.sh,
# started once here and stopped), every request signed with SigV4:
#   - its verdict is exit 1, naming the DELETE check (RGW deletes whatever
#     If-Match says), and it reports that RGW compares If-Match with the
#     ETag sent without its quotes (the quoted one is refused with 412);
#   - S3 error answers show their S3 code and request id;
#   - credentials from a shared-credentials file and profile, and a PREFIX
#     that must be percent-encoded, work alike;
#   - a wrong secret is exit 1 or 3 with SignatureDoesNotMatch, and no run
#     prints a secret;
#   - no credentials at all is exit 2 with a message saying so;
#   - the probe leaves no object behind (checked with Debian's aws CLI).
#
#   FENCEPOST=build/proxy/fencepost tests/coordination/probe_s3.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fencepost=${FENCEPOST:?FENCEPOST: the fencepost binary}
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
secret=$AWS_SECRET_ACCESS_KEY

# probe ARGS...: runs the probe (bounded), its output in $out and its exit
# status in $status.
probe() {
  set +e
  out=$(timeout 120 "$fencepost" probe "$@" --s3-endpoint "$S3_ENDPOINT" \
    --s3-region "$S3_REGION" 2>&1)
  status=$?
  set -e
  echo "--- fencepost probe $* (exit $status)"
  echo "$out"
}

has() {
  grep -qF -- "$1" <<<"$out" || fail "the output lacks '$1'"
}

has_line() {
  grep -qxF -- "$1" <<<"$out" || fail "the output lacks the line '$1'"
}

# No secret in any output: neither the real one nor a wrong one given.
no_secret() {
  if grep -qF -- "$1" <<<"$out"; then fail "the output shows a secret"; fi
}

# The objects left in the bucket, counted by an independent client.
objects() {
  AWS_DEFAULT_REGION=$S3_REGION timeout 60 /usr/bin/aws \
    --endpoint-url "$S3_ENDPOINT" s3api list-objects-v2 \
    --bucket "$S3_BUCKET" --query 'length(Contents || `[]`)' --output text
}

probe "s3://$S3_BUCKET/probe"
[[ $status == 1 ]] || fail "the probe of RGW exited $status, not 1"
has "scratch key probe/fencepost-probe-"
has "PUT with a wrong If-Match: holds (HTTP 412 PreconditionFailed, request id "
has "PUT with If-None-Match: * over a value: holds (HTTP 412 PreconditionFailed, request id "
has "DELETE with a wrong If-Match: DOES NOT HOLD (HTTP 204, value deleted)"
has "PUT with If-Match: the store's own ETag, quoted as the store answered it: refused (HTTP 412 PreconditionFailed"
has "PUT with If-Match: the store's own ETag: holds when the tag is sent without quotes (HTTP 200, value written)"
has "DELETE with If-Match: the store's own ETag: holds when the tag is sent without quotes (HTTP 204, value deleted)"
has "PUT with If-None-Match: * to a new key: holds (HTTP 200, value written)"
has_line "checks that failed: DELETE with a wrong If-Match"
has "verdict: s3://$S3_BUCKET/probe does NOT honour If-Match and If-None-Match: a compare-and-set through it can lose updates (it compares If-Match with the ETag sent without its quotes)"
no_secret "$secret"
[[ $(objects) == 0 ]] || fail "the probe left objects in the bucket"

# A shared-credentials file and profile, and a PREFIX with a space, '+'
# and UTF-8 (percent-encoded in the URL, decoded once into the key).
cat >"$work/credentials" <<CREDENTIALS
[default]
aws_access_key_id = not-this-one
aws_secret_access_key = not-this-one-either
[rgw]
aws_access_key_id = $AWS_ACCESS_KEY_ID
aws_secret_access_key = $secret
CREDENTIALS
(
  unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
  probe "s3://$S3_BUCKET/a%20b+c/%C3%A9" \
    --s3-credentials-file "$work/credentials" --s3-profile rgw
  [[ $status == 1 ]] || fail "the probe with a profile exited $status, not 1"
  has "scratch key a b+c/é/fencepost-probe-"
  has_line "checks that failed: DELETE with a wrong If-Match"
  no_secret "$secret"
)

# A wrong secret: refused by RGW, the S3 code shown, no secret printed.
wrong="wrong-${secret:6}"
AWS_SECRET_ACCESS_KEY=$wrong probe "s3://$S3_BUCKET/probe"
[[ $status == 1 || $status == 3 ]] ||
  fail "a wrong secret exited $status, not 1 or 3"
has "SignatureDoesNotMatch"
has "request id "
no_secret "$wrong"
no_secret "${secret:6}"

# No credentials anywhere: exit 2 before any request.
(
  unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE \
    AWS_SHARED_CREDENTIALS_FILE
  mkdir "$work/home"
  HOME=$work/home probe "s3://$S3_BUCKET/probe"
  [[ $status == 2 ]] || fail "no credentials exited $status, not 2"
  has "no AWS credentials"
)

[[ $(objects) == 0 ]] || fail "a probe left objects in the bucket"
echo "ok"
