#!/usr/bin/env bash
# louped end to end: tracectl attach through the daemon (timed, and
# detached from another tracectl), status/list, a non-root caller refused
# for another user's process but served for its own, SIGTERM sealing a
# running session, and bad configuration.
set -euo pipefail
louped=$1 tracectl=$2 app=$3
source "$(dirname "$0")/privileged.sh"
sock="$work/louped.sock"
T() { "$tracectl" --socket "$sock" "$@"; }
"$louped" --socket "$sock" --socket-group nogroup --output-dir "$work/traces" \
  --rotation-period-s 0 > "$work/louped.log" 2>&1 &
daemon=$!
"$app" 120 > "$work/app.out" &
app_pid=$!
trap 'kill $app_pid $daemon 2>/dev/null; rm -rf "$work"' EXIT
until [ -S "$sock" ] && grep -q ready "$work/app.out"; do sleep 0.05; done

T attach "$app_pid" --duration 1s -q > "$work/timed.out" 2> "$work/timed.err" \
  || fail "attach through louped exited $?: $(cat "$work/timed.err")"
grep -q "louped is tracing" "$work/timed.err" || fail "attach did not use louped: $(cat "$work/timed.err")"
grep -q "verdict: complete" "$work/timed.out" || fail "$(cat "$work/timed.out")"

# File names need not be UTF-8: a probe through such a path and an output
# directory named so travel to louped as bytes, and the trace reads back.
odd=$(printf 'caf\xe9')
ln -s "$(realpath "$app")" "$work/app-$odd"
T attach "$app_pid" --duration 1s -q --uprobe "$work/app-$odd:main" -o "$work/traces-$odd" \
  > "$work/odd.out" 2> "$work/odd.err" || fail "attach with a non-UTF-8 path: $(cat "$work/odd.err")"
grep -q "probe site(s) attached" "$work/odd.err" || fail "no probe through $work/app-$odd: $(cat "$work/odd.err")"
"$tracectl" verify "$work/traces-$odd" > "$work/odd.verify" \
  || fail "the trace in a non-UTF-8 directory: $(cat "$work/odd.verify")"

T attach "$app_pid" --session-id held -q > "$work/held.out" 2>&1 &
holder=$!
until T status held > /dev/null 2>&1; do sleep 0.1; done
sleep 1
T status held | grep -q "^held  running" || fail "status: $(T status held)"
T list | grep -q "^held" || fail "list: $(T list)"
T detach held > "$work/detach.out" || fail "detach exited $?"
wait "$holder" || true
"$tracectl" verify "$work/traces" > "$work/verify.out" || fail "$(cat "$work/verify.out")"
grep -q "sched_switch=" "$work/verify.out" || fail "no sched events: $(cat "$work/verify.out")"

# A caller that is not root: refused for root's process, served for its own.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
set +e
as_nobody "$tracectl" --socket "$sock" attach "$app_pid" --duration 1s 2> "$work/refused.err"
code=$?
set -e
[ "$code" = 2 ] || fail "a non-root caller attaching to root's process exited $code"
grep -q "may trace only its own" "$work/refused.err" || fail "$(cat "$work/refused.err")"
setpriv --reuid=65534 --regid=65534 --clear-groups "$app" 30 > "$work/own.out" &
own=$!
until grep -q ready "$work/own.out"; do sleep 0.05; done
as_nobody "$tracectl" --socket "$sock" attach "$own" --duration 1s -q > "$work/own_trace.out" \
  2>&1 || fail "a non-root caller tracing its own process: $(cat "$work/own_trace.out")"
kill "$own"

# A caller in its own PID namespace names the pid it sees; louped traces
# the right process and records both ids.
unshare --pid --fork --mount-proc bash -c '
  "$1" 30 > "$2/ns_app.out" &
  until grep -q ready "$2/ns_app.out"; do sleep 0.05; done
  ns_pid=$(awk "{print \$2}" "$2/ns_app.out")
  "$3" --socket "$4" attach "$ns_pid" --duration 1s -q -o "$2/ns_traces"
' _ "$app" "$work" "$tracectl" "$sock" > "$work/ns.out" 2>&1 || fail "attach from a PID namespace: $(cat "$work/ns.out")"
"$tracectl" verify "$work/ns_traces" > "$work/ns.verify" || fail "$(cat "$work/ns.verify")"
grep -Eq "processes: [0-9]+\(loupe-demo-app, pid [0-9]+ in its namespace\)" "$work/ns.verify" \
  || fail "namespace and host pids not both recorded: $(cat "$work/ns.verify")"

# SIGTERM with a session running: sealed, complete, exit 0.
T attach "$app_pid" --session-id running -q > /dev/null 2>&1 &
until T status running > /dev/null 2>&1; do sleep 0.1; done
sleep 0.5
kill -TERM "$daemon"
wait "$daemon" || fail "louped exited $? on SIGTERM: $(cat "$work/louped.log")"
ls "$work/traces"/running-*.loupe > /dev/null || fail "the running session was not sealed"
"$tracectl" verify "$work/traces" > /dev/null || fail "traces do not verify after SIGTERM"
[ -e "$sock" ] && fail "louped left its socket behind"

set +e
"$louped" --socket "$work/x.sock" --max-file-size 10 2> "$work/bad.err"
code=$?
set -e
[ "$code" = 2 ] || fail "bad config exited $code"
grep -q "max_file_size (flag): '10' is not a whole number in" "$work/bad.err" || fail "$(cat "$work/bad.err")"
echo "louped: all checks passed"
