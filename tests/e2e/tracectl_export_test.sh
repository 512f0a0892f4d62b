#!/usr/bin/env bash
# tracectl export on a real trace of a program with a known hot path
# (main -> middle -> leaf_work -> mix, inlined): folded stacks name it and
# sum to the sample count, `go tool pprof` reads the profile, names the
# program as its main binary and puts mix on
# top, the Perfetto trace decodes against Perfetto's official .proto with
# every sample and its interned stack, a scheduling track and per-CPU
# scheduling data, JSON has one line per record; bad input
# gets a clear message.
set -euo pipefail
tracectl=$1 app=$2 source=$3
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then
  [ "${LOUPE_REQUIRE_PRIVILEGED:-}" = 1 ] && fail "needs root (LOUPE_REQUIRE_PRIVILEGED=1)"
  echo "SKIP: needs root to load BPF"; exit 77
fi
work=$(mktemp -d)
trap 'kill $app_pid 2>/dev/null || true; rm -rf "$work"' EXIT
export HOME=${HOME:-$work}

mkfifo "$work/in"
"$app" plain 1 < "$work/in" > "$work/app.out" &
app_pid=$!
exec 3> "$work/in"
until grep -q ready "$work/app.out"; do sleep 0.05; done
"$tracectl" attach "$app_pid" --duration 2s --hz 999 --output "$work/trace" \
  > "$work/attach.out" 2>&1 &
tracer=$!
# The work starts once tracing has: attach's own start-up time varies with
# the machine's load.
for _ in $(seq 400); do grep -q "tracing pids" "$work/attach.out" && break; sleep 0.05; done
echo go >&3
wait "$tracer" || fail "attach: $(cat "$work/attach.out")"
exec 3>&-
"$tracectl" verify "$work/trace" > "$work/verify.out" || true
samples=$(grep -o 'cpu_sample=[0-9]*' "$work/verify.out" | cut -d= -f2)
events=$(grep -o -m1 '[0-9]* events  ' "$work/verify.out" | cut -d' ' -f1)
[ "${samples:-0}" -gt 100 ] || fail "too few samples: $(cat "$work/verify.out")"

"$tracectl" export --format folded "$work/trace" -o "$work/cpu.folded"
awk '{ if ($NF !~ /^[0-9]+$/ || NF < 2) bad = 1; sum += $NF } END { exit bad }' "$work/cpu.folded" \
  || fail "a folded line does not parse: $(head -3 "$work/cpu.folded")"
sum=$(awk '{ sum += $NF } END { print sum }' "$work/cpu.folded")
[ "$sum" = "$samples" ] || fail "folded counts sum to $sum, the trace has $samples samples"
hot=$(sort -t' ' -k2 -n "$work/cpu.folded" | tail -1)
[[ "$hot" == *";main;middle;leaf_work;mix "* ]] || fail "hottest stack: $hot"
"$tracectl" export --format folded --stacks offcpu "$work/trace" -o "$work/off.folded"
grep -q "schedule_\[k\]" "$work/off.folded" || fail "no kernel frames off CPU: $(head -3 "$work/off.folded")"

"$tracectl" export --format pprof "$work/trace" -o "$work/cpu.pb.gz"
go tool pprof -top "$work/cpu.pb.gz" > "$work/pprof.out" 2>&1 || fail "go tool pprof: $(cat "$work/pprof.out")"
top=$(awk '/flat%/{getline; print $6; exit}' "$work/pprof.out")
[ "$top" = "mix" ] || fail "pprof's top function is '$top': $(head -12 "$work/pprof.out")"
# pprof's first mapping is the main binary: the program, not libc or the vDSO.
grep -q "^File: $(basename "$app")\$" "$work/pprof.out" \
  || fail "pprof's main binary: $(head -2 "$work/pprof.out")"

# Uncompressed, for protoc to read the packets; the default, deflated,
# must inflate to the same bytes in Perfetto's compressed_packets form.
"$tracectl" export --format perfetto --compress none "$work/trace" -o "$work/trace.pftrace"
"$tracectl" export --format perfetto "$work/trace" -o "$work/deflated.pftrace"
protoc --decode=perfetto.protos.Trace -I "$source/tests/fixtures/perfetto" \
  "$source/tests/fixtures/perfetto/perfetto_trace.proto" \
  < "$work/trace.pftrace" > "$work/perfetto.txt" || fail "the Perfetto trace does not decode"
python3 "$source/tests/e2e/perfetto_inflate.py" < "$work/deflated.pftrace" > "$work/inflated.pftrace" \
  || fail "the deflated Perfetto trace does not inflate"
cmp -s "$work/inflated.pftrace" "$work/trace.pftrace" \
  || fail "the deflated export inflates to other packets than --compress none writes"
[ "$(stat -c %s "$work/deflated.pftrace")" -lt "$(( $(stat -c %s "$work/trace.pftrace") / 2 ))" ] \
  || fail "deflated: $(stat -c %s "$work/deflated.pftrace") bytes, uncompressed $(stat -c %s "$work/trace.pftrace")"
"$tracectl" export --format json --compress none "$work/trace" -o "$work/x.json" 2> "$work/compress.err" \
  && fail "--compress was taken with --format json"
grep -q "\-\-compress applies to --format perfetto, not json" "$work/compress.err" \
  || fail "--compress with json: $(cat "$work/compress.err")"
perf_samples=$(grep -c '^  perf_sample {' "$work/perfetto.txt" || true)
[ "$perf_samples" = "$samples" ] || fail "$perf_samples perf samples for $samples CPU samples"
grep -q 'str: "mix"' "$work/perfetto.txt" || fail "mix is not an interned function name"
grep -q 'process_name: "symbols_app_pie"' "$work/perfetto.txt" || fail "no process track"
grep -q 'name: "scheduling"' "$work/perfetto.txt" || fail "no scheduling track"
# Switches and wakeups are Perfetto's own scheduling data (its CPU tracks
# and thread states), the app named in them.
grep -q 'switch_next_pid: '"$app_pid" "$work/perfetto.txt" || fail "no switch to the app"
grep -q 'waking_pid: ' "$work/perfetto.txt" || fail "no wakeup in the scheduling data"
grep -q 'intern_table: "symbols_app' "$work/perfetto.txt" || fail "the app's name is not interned"
! grep -q 'name: "off-CPU"' "$work/perfetto.txt" || fail "the old off-CPU track is still written"
grep -q 'primary_trace_clock: BUILTIN_CLOCK_MONOTONIC' "$work/perfetto.txt" || fail "no clock snapshot"

"$tracectl" export --format json "$work/trace" -o "$work/records.json"
lines=$(wc -l < "$work/records.json")
[ "$lines" = "$events" ] || fail "$lines JSON lines for $events events"
head -1 "$work/records.json" | grep -q '"kind":' || fail "not JSON records: $(head -1 "$work/records.json")"

# The report names the hot function first, in text and in JSON.
# (Exit 1 is an incomplete trace — a cut stack, say — still reported.)
"$tracectl" report "$work/trace" > "$work/report.txt" || [ $? = 1 ] || fail "report failed"
grep -q '^verdict: ' "$work/report.txt" || fail "no verdict first: $(head -3 "$work/report.txt")"
first=$(grep -A1 '^top on-CPU functions' "$work/report.txt" | tail -1)
[[ "$first" == *" mix" ]] || fail "report's top function: '$first'"
"$tracectl" report --json "$work/trace" > "$work/report.json" || [ $? = 1 ] || fail "JSON report failed"
grep -q '"top_functions":{"sampled":true,"samples":[1-9][0-9]*,"functions":\[{"name":"mix"' "$work/report.json" || fail "JSON report: $(grep -o '"top_functions".\{0,200\}' "$work/report.json")"
set +e
"$tracectl" report "$work/missing" 2> "$work/report.err"
code=$?
set -e
[ "$code" = 2 ] && [ -s "$work/report.err" ] || fail "report on a missing path exited $code"

# A segment cut in half (a crash mid-write): whole frames that are left
# are exported and reported (here the one event block is cut, so none),
# and both commands say the trace is incomplete.
mkdir "$work/cut"
segment=$(ls "$work"/trace/*.loupe | head -n 1)
head -c $(( $(stat -c %s "$segment") / 2 )) "$segment" > "$work/cut/cut.loupe"
"$tracectl" export --format folded "$work/cut" -o "$work/cut.folded" 2> "$work/cut.err" \
  || fail "export of a cut segment failed: $(cat "$work/cut.err")"
grep -q "incomplete" "$work/cut.err" || fail "export did not say the input is incomplete"
set +e
"$tracectl" report "$work/cut" > "$work/cut.report"
code=$?
set -e
[ "$code" = 1 ] || fail "report of a cut segment exited $code"
grep -q '^verdict: INCOMPLETE' "$work/cut.report" || fail "report verdict: $(head -3 "$work/cut.report")"

# Bad input: clear messages, exit 2, no crash.
echo "not a trace" > "$work/junk.loupe"
mkdir "$work/empty"
for bad in "$work/junk.loupe" "$work/empty" "$work/missing"; do
  set +e
  "$tracectl" export --format folded "$bad" -o "$work/out" 2> "$work/bad.err"
  code=$?
  set -e
  if [ "$bad" = "$work/junk.loupe" ]; then
    # A file that is not a segment reads as a damaged one: named, not fatal.
    grep -q "junk.loupe" "$work/bad.err" || fail "junk input not named: $(cat "$work/bad.err")"
  else
    [ "$code" = 2 ] || fail "$bad: exit $code"
    [ -s "$work/bad.err" ] || fail "$bad: no message"
  fi
done
# An output that cannot be opened or written says why, before and after the export.
for format in perfetto pprof folded json; do
  set +e
  "$tracectl" export --format "$format" "$work/trace" -o "$work/no/such/dir/out" 2> "$work/open.err"
  open_code=$?
  set -e
  [ "$open_code" = 2 ] && grep -q "open $work/no/such/dir/out: No such file or directory" "$work/open.err" \
    || fail "$format into a missing directory: exit $open_code, $(cat "$work/open.err")"
done
set +e
"$tracectl" export --format json "$work/trace" -o /dev/full 2> "$work/full.err"
full_code=$?
set -e
[ "$full_code" = 2 ] && grep -q "write /dev/full: No space left on device" "$work/full.err" \
  || fail "export to a full device: exit $full_code, $(cat "$work/full.err")"
echo PASS
