#!/usr/bin/env bash
# Probes through tracectl, embedded and through louped: the shim's events,
# --usdt and --uprobe, a probe that matches nothing named while the session
# runs, --content-policy, and bad probe specs refused with exit 2.
set -euo pipefail
louped=$1 tracectl=$2 shim_app=$3 forms=$4 source=$5
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then
  [ "${LOUPE_REQUIRE_PRIVILEGED:-}" = 1 ] && fail "needs root (LOUPE_REQUIRE_PRIVILEGED=1)"
  echo "SKIP: needs root to load BPF"; exit 77
fi
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT

# start NAME PROGRAM ARGS...: runs a test program that waits for "go".
start() {
  local name=$1; shift
  mkfifo "$work/$name.in"
  "$@" < "$work/$name.in" > "$work/$name.out" &
  pids+=($!)
  exec {fd}> "$work/$name.in"
  eval "${name}_fd=$fd"
  until grep -q ready "$work/$name.out"; do sleep 0.05; done
  eval "${name}_pid=$(awk '/ready/{print $2}' "$work/$name.out")"
}

# Embedded: the shim plus a uprobe with latency, and probes that match nothing.
start shim "$shim_app" 1 20
"$tracectl" attach "$shim_pid" --duration 2s --output "$work/embedded" -q \
  --uprobe 'libc:clock_gettime%return' --uprobe 'libc:no_such_function%return' \
  --usdt 'nosuch:*' --content-policy full \
  > "$work/embedded.out" 2> "$work/embedded.err" &
tracer=$!
until grep -q "probe site" "$work/embedded.err"; do sleep 0.05; done
echo go >&"$shim_fd"
wait "$tracer" || true
grep -q "warning.* --usdt 'nosuch:\*': no probe matches" "$work/embedded.err" \
  || fail "no warning for a probe that matches nothing: $(cat "$work/embedded.err")"
# The attach's closing summary repeats it next to its verdict, as verify does.
grep -q "^note: --uprobe 'libc:no_such_function%return' in pid $shim_pid: no symbol" \
  "$work/embedded.out" || fail "attach's summary has no note of it: $(cat "$work/embedded.out")"
"$tracectl" verify "$work/embedded" > "$work/embedded.verify" || true
# ... and the trace says so too, not only the attach's log.
grep -q "note: --uprobe 'libc:no_such_function%return' in pid $shim_pid: no symbol" \
  "$work/embedded.verify" || fail "no note of the probe not placed: $(cat "$work/embedded.verify")"
for kind in span_begin span_end instant counter operation_begin sched_switch; do
  grep -q "$kind=" "$work/embedded.verify" || fail "no $kind: $(cat "$work/embedded.verify")"
done
grep -q "shim/string_truncated" "$work/embedded.verify" \
  || fail "the cut strings are not reported: $(cat "$work/embedded.verify")"
# Where root may take a real-time priority, the sites were placed at it,
# and the trace says so (with the sites' count).
placed="normal"
chrt -f 1 true 2> /dev/null && placed="real-time"
"$tracectl" verify --json "$work/embedded" > "$work/embedded.json" || true
grep -q "\"uprobes\":\"[0-9]* of [0-9]* sites attached[^\"]*, placed at $placed priority" "$work/embedded.json" \
  || fail "the uprobes feature, $placed priority expected: $(cat "$work/embedded.json")"
# In Perfetto: the named thread, its spans, the counter track, the
# operations on request lanes, the uprobe latency slices.
"$tracectl" export --format perfetto --compress none "$work/embedded" -o "$work/shim.pftrace"
protoc --decode=loupe.perfetto.Trace -I "$source/proto" "$source/proto/perfetto/trace.proto" \
  < "$work/shim.pftrace" > "$work/shim.perfetto" || fail "the Perfetto trace does not decode"
for expected in 'thread_name: "worker-0"' 'name: "handle"' 'name: "depth"' \
                'name: "requests 1"' 'name: "request"' 'name: "libc:clock_gettime"' 'name: "parsed"'; do
  grep -q "$expected" "$work/shim.perfetto" || fail "Perfetto trace lacks $expected"
done
# Spans are requests: counted per kind, for the whole trace and for one operation.
"$tracectl" report "$work/embedded" > "$work/report.txt" || true
grep -Eq '^handle \(span\): 20 requests' "$work/report.txt" || fail "report spans: $(grep '(span)' "$work/report.txt")"
"$tracectl" report --operation 1 "$work/embedded" > "$work/report_op.txt" || true
grep -Eq '^handle \(span\): 1 requests' "$work/report_op.txt" || fail "report --operation 1: $(grep '(span)' "$work/report_op.txt")"
grep -q 'clock_gettime (uprobe)' "$work/report.txt" || fail "no uprobe calls in the report: $(grep uprobe "$work/report.txt")"
begins=$(grep -c 'type: TYPE_SLICE_BEGIN' "$work/shim.perfetto")
ends=$(grep -c 'type: TYPE_SLICE_END' "$work/shim.perfetto")
[ "$begins" = "$ends" ] || fail "$begins slice begins, $ends ends"

# Through louped: the request carries --usdt with a string argument.
sock="$work/louped.sock"
"$louped" --socket "$sock" --output-dir "$work/traces" > "$work/louped.log" 2>&1 &
pids+=($!)
start forms "$forms" 3
until [ -S "$sock" ]; do sleep 0.05; done
"$tracectl" --socket "$sock" attach "$forms_pid" --duration 2s -q --usdt 'forms:*' --usdt 'nosuch:x' \
  > "$work/daemon.out" 2> "$work/daemon.err" &
tracer=$!
until grep -q "probe site" "$work/daemon.err"; do sleep 0.05; done
grep -q "louped is tracing" "$work/daemon.err" || fail "not through louped: $(cat "$work/daemon.err")"
grep -q "7 probe site(s) attached" "$work/daemon.err" || fail "$(cat "$work/daemon.err")"
grep -q "warning: --usdt 'nosuch:x': no probe matches" "$work/daemon.err" \
  || fail "louped's probe warning did not reach tracectl: $(cat "$work/daemon.err")"
echo go >&"$forms_fd"
wait "$tracer" || fail "attach through louped: $(cat "$work/daemon.err")"
"$tracectl" verify "$work/traces" > "$work/daemon.verify" || fail "$(cat "$work/daemon.verify")"
grep -q "usdt=18" "$work/daemon.verify" || fail "expected 18 USDT events: $(cat "$work/daemon.verify")"

# Bad specs: refused before anything starts, naming what is wrong.
for bad in "--usdt=nocolon" "--uprobe=libc:malloc(9)" "--content-policy=everything"; do
  set +e
  "$tracectl" attach "$forms_pid" --duration 1s "$bad" 2> "$work/bad.err"
  code=$?
  set -e
  [ "$code" = 2 ] || fail "$bad exited $code"
  grep -q "${bad#--*=}" "$work/bad.err" || fail "$bad: $(cat "$work/bad.err")"
done
echo PASS
