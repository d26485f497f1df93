#!/usr/bin/env bash
# Failover: holder A takes a lease with a 1 s TTL and stops renewing (as a
# crashed or partitioned leader would); B waits for it. B is granted the
# lease once A's runs out, with the next token, and the lease's transition
# count rises. Prints the failover time: A's last renewal to B's grant.
#
#   examples/failover.sh
#
# It starts its own fencepost on ephemeral ports of 127.0.0.1.
set -euo pipefail
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
. "$(dirname "$0")/lib.sh"
start_server
name=demo/failover
now_ms() { date +%s%3N; }

a=$("$fencepost" lease acquire "$name" --holder A --ttl 1s)
last_renewal=$(now_ms)
a_token=$(grep -o '"token":[0-9]*' <<<"$a" | cut -d: -f2)
a_transitions=$(grep -o '"transitions":[0-9]*' <<<"$a" | cut -d: -f2)
echo "A holds $name with token $a_token (transitions $a_transitions), then stops renewing"

b=$("$fencepost" lease acquire "$name" --holder B --ttl 1s --wait 10s)
granted=$(now_ms)
b_token=$(grep -o '"token":[0-9]*' <<<"$b" | cut -d: -f2)
b_transitions=$(grep -o '"transitions":[0-9]*' <<<"$b" | cut -d: -f2)
echo "B holds $name with token $b_token (transitions $b_transitions)"
echo "failover: $((granted - last_renewal)) ms from A's last renewal to B's grant"
if [ "$b_token" -ne $((a_token + 1)) ] || [ "$b_transitions" -le "$a_transitions" ]; then
  echo "B's token or transitions did not rise" >&2
  exit 1
fi
