#!/usr/bin/env bash
# tracectl report names the cause of a slow request: a handler (operation
# 42, span "handle") waits for a lock another thread holds while sleeping
# 50 ms. The slowest spans must show that time as a futex lock wait, blocked
# in pthread_mutex_lock, woken by the holder — in text and in JSON.
set -euo pipefail
tracectl=$1 app=$2
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then
  [ "${LOUPE_REQUIRE_PRIVILEGED:-}" = 1 ] && fail "needs root (LOUPE_REQUIRE_PRIVILEGED=1)"
  echo "SKIP: needs root to load BPF"; exit 77
fi
work=$(mktemp -d)
trap 'kill $app_pid 2>/dev/null || true; rm -rf "$work"' EXIT
mkfifo "$work/in"
"$app" 50 3 < "$work/in" > "$work/app.out" &
app_pid=$!
exec 3> "$work/in"
until grep -q ready "$work/app.out"; do sleep 0.05; done
"$tracectl" attach "$app_pid" --duration 1500ms --output "$work/trace" -q > "$work/attach.out" 2>&1 &
tracer=$!
sleep 0.5
echo go >&3
set +e
wait "$tracer"
code=$?
set -e
# 1 is a trace with losses (a stack cut short, say): still reportable.
[ "$code" -le 1 ] || fail "attach exited $code: $(cat "$work/attach.out")"
read -r _ holder handler < <(grep done "$work/app.out")
exec 3>&-

"$tracectl" report "$work/trace" > "$work/report.txt" || [ $? = 1 ] || fail "report failed"
slow=$(sed -n '/^slowest spans/,$p' "$work/report.txt")
[[ "$slow" == *"handle on tid $handler handler, operation 42"* ]] || fail "no slow handle span: $slow"
[[ "$slow" == *"lock wait (futex)"* ]] || fail "the wait is not a lock wait: $slow"
[[ "$slow" == *"woken by tid $holder holder"* ]] || fail "the holder is not named as the waker: $slow"
[[ "$slow" != *"woken by tid 0"* ]] || fail "a wakeup without its waker: $slow"
[[ "$slow" == *"__lll_lock_wait"* ]] || fail "the blocking stack does not reach the lock: $slow"
# The worker threads' stacks (not only the main thread's) are named.
top_stacks=$(sed -n '/^top off-CPU stacks/,/^$/p' "$work/report.txt")
[[ "$top_stacks" == *"start_thread"* ]] || fail "threads' stacks unnamed: $top_stacks"
# Each handle span lasts the holder's remaining 45 ms: so do its percentiles.
p50=$(awk '$1 == "handle" {print int($3); exit}' <<< "$(sed -n '/^spans/,/^$/p' "$work/report.txt")")
[ "${p50:-0}" -ge 35 ] && [ "$p50" -le 60 ] || fail "handle p50 of ${p50:-?} ms, expected about 45"
wait_ms=$(grep -o -m1 'lock wait (futex) [0-9.]*' <<< "$slow" | awk 'NR == 1 {print int($4)}')
[ "$wait_ms" -ge 35 ] && [ "$wait_ms" -le 60 ] || fail "lock wait of $wait_ms ms, expected about 45"

"$tracectl" report --json "$work/trace" > "$work/report.json" || [ $? = 1 ] || fail "JSON report failed"
grep -q "\"name\":\"handle\",\"tid\":$handler,\"operation_id\":42" "$work/report.json" \
  || fail "JSON slowest spans: $(grep -o '"slowest":.\{0,300\}' "$work/report.json")"
grep -q "\"wakers\":\[{\"tid\":$holder," "$work/report.json" || fail "JSON wakers"

"$tracectl" report --operation 42 "$work/trace" > "$work/op.txt" || true
grep -Eq '^  handle +3 ' "$work/op.txt" || fail "--operation 42 spans: $(grep -A3 '^spans' "$work/op.txt")"
echo PASS
