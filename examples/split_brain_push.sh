# The `push` story of examples/split_brain.sh (sourced by it, with its
# server, watch terminal, job and checks): a leader is fenced out while its
# lease is live, and the watch, not the next renewal, stops it.
#
# A holds orders/leader with a 6 s TTL (renewed every 2 s) and writes
# orders/1. An operator moves the fence above A's token (`fencepost fence
# bump`), as a failover tool would. A's `lease run` watches the fence (a
# long poll on the admin port): it sends its job SIGTERM the moment the
# fence moves, and the job's last flush, sent with A's token, is refused.
# The time from the bump to A's exit is printed; without the watch A would
# have gone on writing until its next renewal was refused. B is granted the
# lease once A's record of it runs out (a holder that lost its lease does
# not release it), with a token above the bump's.

start_a 6s
echo "A leads with token $a_token (TTL 6 s, renewed every 2 s) and writes orders/1"
sleep 0.3 # A's watch is in place

bump=$("$fencepost" fence bump orders/leader --token $((a_token + 1)) \
  --admin "$b_admin") || die "the bump of orders/ was refused"
# When the fence moved, by the server's clock (the same machine's): A's
# stop is timed from there, and no write of A's sent after it may land.
bumped=$(date -d "$(field updated_at "$bump")" +%s%N)
echo "an operator fences A out: the fence of orders/ goes to $((a_token + 1))"
a_status=0
wait "$a_pid" || a_status=$?
stopped=$(date +%s%N)
a_pid=
stop_ms=$(((stopped - bumped) / 1000000))
a_said=$(grep -m1 'lease lost' "$server_dir/a.err" || tail -n1 "$server_dir/a.err")
echo "A's lease run exited $a_status ${stop_ms} ms after the bump: $a_said"
b=$("$fencepost" lease acquire orders/leader --holder B --ttl 30s \
  --wait 15s --admin "$b_admin") || die "B was not granted the lease"
b_token=$(field token "$b")
echo "B is granted the lease with token $b_token once A's ran out"
b_code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT \
  -H "Fencing-Token: $b_token" --data 'B: shipped' "$b_data/orders/1")
echo "B writes orders/1: $b_code"
after=$(awk -v t="$bumped" '$4 > t' "$JOB_LOG")
echo "A's writes sent after the fence moved (holder, status, token, sent, body):"
sed 's/^/  /' <<<"$after"
show_watch

[ "$a_status" = 75 ] || fail "A's lease run exited $a_status, expected 75 (lease lost)"
[[ $a_said == *"went above token $a_token"* ]] ||
  fail "A's lease run does not say its fence went above its token: $a_said"
# The point of the watch: A stopped before its next renewal (2 s).
[ "$stop_ms" -lt 1500 ] ||
  fail "A stopped ${stop_ms} ms after the bump, not within a round trip"
[ "$(grep -c '^A 20[0-9] ' <<<"$after" || true)" = 0 ] ||
  fail "a write of A's landed after the bump"
[ "$b_code" = 200 ] || fail "B's write of orders/1 got $b_code, expected 200"
[ "$b_token" -gt $((a_token + 1)) ] || fail "B's token $b_token is not above the bump's"
grep -q '"event":"rejection".*"presented_token":'"$a_token" "$server_dir/watch.out" ||
  fail "the watch terminal did not show A's refused last write"
grep -q '"event":"fence","id":[0-9]*,"fence":"orders/","token":'$((a_token + 1)) \
  "$server_dir/watch.out" || fail "the watch terminal did not show the bump"
grep -q '"event":"lease".*"holder":"B".*"change":"granted"' "$server_dir/watch.out" ||
  fail "the watch terminal did not show B's grant"
if [ "$failures" != 0 ]; then
  echo "the story did not go as expected for mode push ($failures checks failed)" >&2
  exit 1
fi
echo "the watch stopped A ${stop_ms} ms after the fence moved; its next renewal was up to 2 s away"
exit 0
