#!/bin/sh
# The leader's job for examples/split_brain.sh: it writes orders/1 through
# fencepost's data port in a loop with the FENCING_TOKEN `lease run` gave
# it, and, like many real jobs, flushes one last write when it is told to
# stop. Each answer is logged to $JOB_LOG as "NAME STATUS TOKEN SENT BODY"
# (SENT: when the write was sent, in Unix nanoseconds).
#
#   examples/split_brain_job.sh NAME   # under lease run, as split_brain.sh runs it
case ${1:-} in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
name=$1
i=0
put() {
  sent=$(date +%s%N)
  code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT \
    -H "Fencing-Token: $FENCING_TOKEN" --data "$1" \
    "$FENCEPOST_DATA/orders/1")
  echo "$name $code $FENCING_TOKEN $sent $1" >>"$JOB_LOG"
}
trap 'put "$name: cancelled (final flush)"; exit 0' TERM
while :; do
  i=$((i + 1))
  put "$name: order update $i"
  sleep 0.05
done
