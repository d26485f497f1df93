#!/usr/bin/env bash
# Fenced side effects (docs/effects.md): workers charge a payment service
# through fencepost (--effect-target payments=...), and the service counts
# what reaches it:
#  1. worker A, under the lease billing/leader, charges order 1817 and
#     retries it with the same Idempotency-Key: the service takes one
#     charge, and the retry gets the recorded answer;
#  2. A's lease runs out and worker B takes it over (a higher token): A's
#     late charge of order 1818 is refused and never reaches the service;
#     B's goes through;
#  3. the service holds a charge past --upstream-timeout (1 s): fencepost
#     cannot know whether it went through, so the retry is refused as an
#     unknown outcome, never sent twice, and listed for a person to settle.
#
#   examples/payment_webhook.sh
#
# It starts its own fencepost and payment service on ephemeral ports of
# 127.0.0.1.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
. "$(dirname "$0")/lib.sh"
needs python3

work=$(mktemp -d)
python3 "$(dirname "$0")/payment_service.py" "$work/port" &
service=$!
trap 'kill $service 2>/dev/null || true; stop_server; rm -rf "$work"' EXIT
for _ in $(seq 1 500); do [ -s "$work/port" ] && break; sleep 0.01; done
payments=http://127.0.0.1:$(cat "$work/port")
start_server --effect-target "payments=$payments" --upstream-timeout 1
trap 'kill $service 2>/dev/null || true; stop_server; rm -rf "$work"' EXIT
charges() { field count "$(curl -s "$payments/count?key=$1")"; }
fail() { echo "$*" >&2; exit 1; }
echo '{"amount": 1200, "currency": "EUR"}' >"$work/charge.json"

echo "1. worker A charges order 1817, then retries it"
export FP=$fencepost CHARGE=$work/charge.json WORK=$work
"$fencepost" lease run billing/leader --holder worker-a --ttl 1s -- sh -c '
  "$FP" effect payments/charges --idempotency-key order-1817 "$CHARGE"
  echo
  "$FP" effect payments/charges --idempotency-key order-1817 "$CHARGE" \
    2>"$WORK/retry.err"
  echo
  cat "$WORK/retry.err"' >"$work/a.out" 2>"$work/a.err" ||
  fail "worker A failed: $(cat "$work/a.err")"
sed 's/^/   /' "$work/a.out"
[ "$(charges order-1817)" = 1 ] || fail "the service took $(charges order-1817) charges"
echo "   the service took 1 charge for order-1817"

echo "2. A's lease runs out; B takes it over; A's late charge of order 1818"
token_a=$(field token "$("$fencepost" lease acquire billing/leader --holder worker-a --ttl 1s)")
sleep 1.2  # A pauses past its lease
token_b=$(field token "$("$fencepost" lease acquire billing/leader --holder worker-b --ttl 30s)")
status=0
"$fencepost" effect payments/charges --token "$token_a" \
  --fence-key billing/leader --idempotency-key order-1818 "$CHARGE" \
  >"$work/late.out" 2>&1 || status=$?
echo "   A (token $token_a) exited $status: $(field type "$(cat "$work/late.out")")"
[ "$status" = 1 ] && [ "$(charges order-1818)" = 0 ] ||
  fail "A's stale charge was not refused, or reached the service"
"$fencepost" effect payments/charges --token "$token_b" \
  --fence-key billing/leader --idempotency-key order-1818 "$CHARGE" >/dev/null
echo "   B (token $token_b) charged it; the service took $(charges order-1818)"
[ "$(charges order-1818)" = 1 ] || fail "B's charge did not reach the service"

echo "3. the service holds order 1819's charge past the 1 s timeout"
for attempt in first retry; do
  status=0
  "$fencepost" effect payments/slow-charges --token "$token_b" \
    --fence-key billing/leader --idempotency-key order-1819 "$CHARGE" \
    >"$work/slow.out" 2>&1 || status=$?
  echo "   the $attempt exited $status: $(field type "$(cat "$work/slow.out")")"
done
grep -q effect-outcome-unknown "$work/slow.out" || fail "the retry was not refused"
sleep 2.5  # the service answers its one charge
echo "   the service took $(charges order-1819) charge; fencepost lists it as:"
listed=$(curl -s "$FENCEPOST_ADMIN/v1/effects?state=unknown")
echo "   $listed"
[ "$(charges order-1819)" = 1 ] && grep -q order-1819 <<<"$listed" ||
  fail "the unknown charge was sent twice or not listed"
