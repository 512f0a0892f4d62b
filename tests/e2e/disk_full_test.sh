#!/usr/bin/env bash
# A full disk end to end (issue 14 items 2 and 3): louped writes a busy
# target's trace onto a small tmpfs that fills up; status shows the writer's
# failed writes while it is full; room is made and writing resumes. Then
# every file is sealed and verifies without damage, and attach's last lines,
# status of the ended session and `tracectl verify` agree to the event:
# the same events, segments and losses by source/reason. The same agreement
# for a session whose segments a small budget evicts.
#   disk_full_test.sh LOUPED TRACECTL APP
set -euo pipefail
louped=$1 tracectl=$2 app=$3
source "$(dirname "$0")/privileged.sh"  # root also mounts the tmpfs
sock="$work/louped.sock"
disk="$work/disk"
mkdir "$disk"
mount -t tmpfs -o size=2m tmpfs "$disk" || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
daemon= app_pid= client=
cleanup() {
  kill -9 $daemon $app_pid $client 2> /dev/null || true
  umount -l "$disk" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
T() { "$tracectl" --socket "$sock" "$@"; }

# Most of the disk taken: the trace fills the rest within seconds.
head -c $((1600 * 1024)) /dev/zero > "$disk/filler"
"$louped" --socket "$sock" --output-dir "$disk/traces" --rotation-period-s 0 \
  --max-file-size 262144 > "$work/louped.log" 2>&1 &
daemon=$!
: > "$work/app.out"
"$app" 120 > "$work/app.out" &
app_pid=$!
until [ -S "$sock" ] && grep -q ready "$work/app.out"; do sleep 0.05; done

T attach "$app_pid" --session-id full --duration 10s -q > "$work/attach.out" 2> "$work/attach.err" &
client=$!
full=0
for _ in $(seq 80); do
  if T status full 2> /dev/null | grep -q "writer/write_failed"; then full=1; break; fi
  sleep 0.1
done
[ "$full" = 1 ] || fail "status never showed a failed write: $(T status full 2>&1)"
sleep 1
rm "$disk/filler"  # room again
set +e
wait "$client"
code=$?
set -e
client=
[ "$code" = 1 ] || fail "attach exited $code (1: incomplete): $(cat "$work/attach.out" "$work/attach.err")"
T status full > "$work/status.out" || fail "status of the ended session"
kill -TERM "$daemon"
wait "$daemon" || fail "louped exited $? on SIGTERM"
daemon=

active=$(find "$disk/traces" -name '*.active')
[ -z "$active" ] || fail "left unsealed: $active"
set +e
"$tracectl" verify "$disk/traces" > "$work/verify.out" 2>&1
code=$?
set -e
[ "$code" = 1 ] || fail "verify exited $code: $(tail -5 "$work/verify.out")"
grep -Eiq "corrupt|damaged|no trailer|truncated" "$work/verify.out" \
  && fail "a file does not read cleanly: $(grep -Ei "corrupt|damaged|no trailer|truncated" "$work/verify.out" | head -3)"

# The three ledgers of session $1 (files in $2, outputs in $work/$1.*):
# events, segments, and losses by source/reason.
losses() {  # "key count" lines, summed by key
  sed -nE 's/^ *lost ([0-9]+) \(([^)]*)\)$/\2 \1/p' "$1" \
    | awk '{ sum[$1] += $2 } END { for (k in sum) print k, sum[k] }' | sort
}
compare_ledgers() {
  local name=$1 out="$work/$1"
  local attach_events attach_segments verify_events verify_segments status_events
  attach_events=$(sed -nE 's/^trace: .* \(([0-9]+) segment\(s\), ([0-9]+) events.*/\2/p' "$out.attach")
  attach_segments=$(sed -nE 's/^trace: .* \(([0-9]+) segment\(s\).*/\1/p' "$out.attach")
  verify_events=$(sed -nE 's/^INCOMPLETE: ([0-9]+) segment\(s\), ([0-9]+) events.*/\2/p' "$out.verify")
  verify_segments=$(sed -nE 's/^INCOMPLETE: ([0-9]+) segment\(s\).*/\1/p' "$out.verify")
  status_events=$(sed -nE "s/^$name .* ([0-9]+) events .*/\1/p" "$out.status")
  echo "$name: attach $attach_events events in $attach_segments segment(s), status $status_events, verify $verify_events in $verify_segments"
  [ -n "$attach_events" ] && [ "$attach_events" = "$verify_events" ] \
    || fail "$name: attach says $attach_events events, verify $verify_events"
  [ "$status_events" = "$verify_events" ] || fail "$name: status says $status_events events, verify $verify_events"
  [ "$attach_segments" = "$verify_segments" ] \
    || fail "$name: attach says $attach_segments segments, verify $verify_segments"
  losses "$out.attach" > "$out.attach.losses"
  losses "$out.status" > "$out.status.losses"
  losses "$out.verify" > "$out.verify.losses"
  cat "$out.verify.losses"
  diff "$out.attach.losses" "$out.verify.losses" || fail "$name: attach and verify count losses apart"
  diff "$out.status.losses" "$out.verify.losses" || fail "$name: status and verify count losses apart"
}
cp "$work/attach.out" "$work/full.attach"
cp "$work/status.out" "$work/full.status"
cp "$work/verify.out" "$work/full.verify"
compare_ledgers full
grep -q "^writer/write_failed [1-9]" "$work/full.verify.losses" || fail "no failed write in the trace"
# Writing resumed once there was room: the last segment is newer than the failure.
last=$(ls "$disk/traces" | sort | tail -1)
[ "$(echo "$last" | sed -nE 's/full-0*([0-9]+)\.loupe/\1/p')" -ge 1 ] || fail "nothing after the disk filled"

# --- Evictions by a small budget: the same agreement.
"$louped" --socket "$sock" --output-dir "$work/evict" --rotation-period-s 0 \
  --max-file-size 65536 --max-total-size 196608 >> "$work/louped.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do T list > /dev/null 2>&1 && break; sleep 0.1; done
set +e
T attach "$app_pid" --session-id evict --duration 4s -q > "$work/evict.attach" 2>&1
code=$?
set -e
[ "$code" = 1 ] || fail "attach under a small budget exited $code: $(cat "$work/evict.attach")"
T status evict > "$work/evict.status" || fail "status of the ended session"
kill -TERM "$daemon"
wait "$daemon" || fail "louped exited $? on SIGTERM"
daemon=
set +e
"$tracectl" verify "$work/evict" > "$work/evict.verify" 2>&1
set -e
compare_ledgers evict
grep -q "^writer/segment_evicted [1-9]" "$work/evict.verify.losses" || fail "nothing evicted"
echo "disk full and evictions: all checks passed"
