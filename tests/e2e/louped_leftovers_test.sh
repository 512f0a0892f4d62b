#!/usr/bin/env bash
# What a killed louped leaves behind (issue 14 items 4 and 6): louped is
# killed (-9) while a session writes, so its segment stays .active. Started
# again, louped seals that leftover to its last whole frame with a trailer
# (verdict incomplete, "louped stopped before sealing it"), leaves files
# that are not its own alone, and counts the sealed leftover in the folder's
# budget (a session under a budget it does not fit evicts it and says so).
# A quiet target's session leaves a sealed segment that verifies complete.
#   louped_leftovers_test.sh LOUPED TRACECTL APP
set -euo pipefail
louped=$1 tracectl=$2 app=$3
source "$(dirname "$0")/privileged.sh"
sock="$work/louped.sock"
traces="$work/traces"
T() { "$tracectl" --socket "$sock" "$@"; }
daemon= app_pid= quiet=
trap 'kill -9 $daemon $app_pid $quiet 2> /dev/null || true; rm -rf "$work"' EXIT
start_louped() {  # extra flags; logs to $work/louped.log
  "$louped" --socket "$sock" --output-dir "$traces" --rotation-period-s 0 "$@" \
    >> "$work/louped.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do T list > /dev/null 2>&1 && return 0; sleep 0.1; done
  fail "louped did not start: $(tail -5 "$work/louped.log")"
}

: > "$work/app.out"
"$app" 120 > "$work/app.out" &
app_pid=$!
until grep -q ready "$work/app.out"; do sleep 0.05; done

# --- A session cut short by kill -9: its segment stays .active.
start_louped
T attach "$app_pid" --session-id cut --detach -q > "$work/attach.out" 2>&1 \
  || fail "attach: $(cat "$work/attach.out")"
sleep 3  # blocks are flushed every second
kill -9 "$daemon"
wait "$daemon" 2> /dev/null || true
rm -f "$sock"
leftover="$traces/cut-000000.loupe.active"
[ -f "$leftover" ] || fail "no .active leftover: $(ls "$traces")"
[ -f "$traces/cut-000000.loupe" ] && fail "the segment was sealed before the kill"
# Files that are not this louped's: junk named like a segment, and a
# symlink to the leftover.
head -c 4096 /dev/urandom > "$traces/junk-000000.loupe.active"
ln -s "$leftover" "$traces/link-000000.loupe.active"
junk_sum=$(sha256sum < "$traces/junk-000000.loupe.active")

# --- Started again: the leftover is sealed, the rest left alone.
start_louped
grep -q "sealed 1 segment(s) an earlier run left unsealed" "$work/louped.log" \
  || fail "no leftover sealed at start: $(tail -5 "$work/louped.log")"
[ -e "$leftover" ] && fail "the leftover is still .active"
sealed="$traces/cut-000000.loupe"
[ -f "$sealed" ] || fail "no sealed leftover: $(ls "$traces")"
[ "$(sha256sum < "$traces/junk-000000.loupe.active")" = "$junk_sum" ] || fail "junk was touched"
[ -L "$traces/link-000000.loupe.active" ] || fail "the symlink was touched"
set +e
"$tracectl" verify "$sealed" > "$work/verify.out" 2>&1
code=$?
set -e
[ "$code" = 1 ] || fail "verify of the sealed leftover exited $code: $(cat "$work/verify.out")"
grep -q "louped stopped before sealing it" "$work/verify.out" \
  || fail "no reason in verify: $(cat "$work/verify.out")"
grep -Eiq "corrupt|no trailer|truncated" "$work/verify.out" \
  && fail "the sealed leftover does not read cleanly: $(cat "$work/verify.out")"
grep -Eq "^INCOMPLETE: 1 segment\(s\), [1-9][0-9]* events" "$work/verify.out" \
  || fail "verify: $(cat "$work/verify.out")"
leftover_events=$(sed -nE 's/^INCOMPLETE: 1 segment\(s\), ([0-9]+) events.*/\1/p' "$work/verify.out")

# --- A quiet target: one sealed segment, complete.
sleep 60 &
quiet=$!
T attach "$quiet" --session-id quiet --duration 1s -q > "$work/quiet.out" 2>&1 \
  || fail "attach to a quiet target: $(cat "$work/quiet.out")"
grep -q "verdict: complete" "$work/quiet.out" || fail "$(cat "$work/quiet.out")"
"$tracectl" verify "$traces"/quiet-*.loupe > "$work/quiet.verify" 2>&1 \
  || fail "a quiet target's trace: $(cat "$work/quiet.verify")"
"$tracectl" report "$traces"/quiet-*.loupe > /dev/null 2>&1 \
  || fail "report of a quiet target's trace: $("$tracectl" report "$traces"/quiet-*.loupe 2>&1 | tail -3)"
kill -TERM "$daemon"
wait "$daemon" || fail "louped exited $? on SIGTERM"

# --- The sealed leftover counts in the budget: under a budget with no room
# for it beside a new session's file, it is evicted, and the new session's
# trace says how many events that took.
size=$(stat -c %s "$sealed")
max_file=65536
total=$((2 * max_file))
if [ "$size" -le $((total - max_file)) ]; then
  echo "note: the leftover ($size bytes) fits beside a new file; budget not checked"
else
  rm -f "$traces"/quiet-*.loupe
  start_louped --max-file-size $max_file --max-total-size $total
  set +e  # a quiet target, so that the session evicts none of its own
  T attach "$quiet" --session-id after --duration 1s -q > "$work/after.out" 2>&1
  set -e
  [ -e "$sealed" ] && fail "the sealed leftover was not counted in the budget: $(ls -l "$traces")"
  grep -q "writer/segment_evicted" "$work/after.out" \
    || fail "the eviction is not in attach's ledger: $(cat "$work/after.out")"
  set +e
  "$tracectl" verify "$traces"/after-*.loupe > "$work/after.verify" 2>&1
  set -e
  evicted=$(sed -nE 's/.*lost ([0-9]+) \(writer\/segment_evicted\).*/\1/p' "$work/after.verify" | head -1)
  [ "$evicted" = "$leftover_events" ] \
    || fail "evicted $evicted events, the leftover held $leftover_events: $(cat "$work/after.verify")"
  kill -TERM "$daemon"
  wait "$daemon" || fail "louped exited $? on SIGTERM"
fi
echo "louped leftovers: all checks passed"
