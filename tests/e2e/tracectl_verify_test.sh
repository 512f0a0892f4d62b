#!/usr/bin/env bash
# tracectl demo + verify end to end: a whole trace verifies (exit 0), a cut
# or foreign file makes it incomplete (exit 1) with the reason, bad paths are
# errors (exit 2), and --json says the same for scripts.
set -euo pipefail
tracectl=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 300 k events are ~1 MB (3.2 bytes/event): rotate at 256 KiB for several segments.
"$tracectl" demo --output "$work/t" --events 300000 --max-file-size 262144 > "$work/demo.out"
grep -q "wrote 300000 events" "$work/demo.out" || fail "demo output: $(cat "$work/demo.out")"
segments=$(ls "$work/t" | wc -l)
[ "$segments" -ge 2 ] || fail "expected rotation into several segments, got $segments"

"$tracectl" verify "$work/t" > "$work/ok.out" || fail "verify of a whole trace exited $?"
grep -q "^COMPLETE: $segments segment(s), 300[0-9]* events, 0 lost" "$work/ok.out" \
  || fail "verify summary: $(tail -1 "$work/ok.out")"
"$tracectl" verify --json "$work/t" | grep -q '^{"verdict":"complete"' || fail "json verdict"

# A copy of a segment (the same session and sequence) is read once, by
# verify, report and export alike: the counts stay, the verdict too.
first=$(ls "$work/t"/*.loupe | head -1)
cp "$first" "$work/t/zz-copy.loupe"
"$tracectl" verify "$work/t" > "$work/copy.out" || fail "verify with a copy exited $?"
grep -q "^COMPLETE: $segments segment(s), 300[0-9]* events, 0 lost" "$work/copy.out" \
  || fail "a copy counted twice: $(tail -1 "$work/copy.out")"
grep -q "^copy        $work/t/zz-copy.loupe" "$work/copy.out" || fail "the copy not named: $(cat "$work/copy.out")"
"$tracectl" report "$work/t" > "$work/copy.report" || fail "report with a copy exited $?"
grep -q "note: $work/t/zz-copy.loupe holds the same segment as $first: read once" "$work/copy.report" \
  || fail "report: $(head -5 "$work/copy.report")"
head -1 "$work/copy.report" | grep -q "verdict: complete — 300[0-9]* events" \
  || fail "report counted the copy: $(head -1 "$work/copy.report")"
rm "$work/t/zz-copy.loupe"

# Cut the last segment in half: readable up to the cut, flagged, exit 1.
last=$(ls "$work/t"/*.loupe | tail -1)
truncate -s $(( $(stat -c %s "$last") / 2 )) "$last"
set +e
"$tracectl" verify "$work/t" > "$work/cut.out"; code=$?
set -e
[ "$code" = 1 ] || fail "verify of a cut trace exited $code, want 1"
grep -q "^INCOMPLETE" "$work/cut.out" || fail "cut trace not flagged"
grep -q "truncated\|no trailer" "$work/cut.out" || fail "no reason given: $(cat "$work/cut.out")"

# Not a trace at all.
echo "hello" > "$work/t/notes.loupe"
set +e
"$tracectl" verify "$work/t/notes.loupe" > "$work/foreign.out"; code=$?
"$tracectl" verify "$work/missing" 2> "$work/missing.err"; missing_code=$?
set -e
[ "$code" = 1 ] || fail "verify of a foreign file exited $code, want 1"
grep -q "not a Loupe trace segment" "$work/foreign.out" || fail "foreign file reason"
[ "$missing_code" = 2 ] || fail "verify of a missing path exited $missing_code, want 2"
grep -q "no such file or directory" "$work/missing.err" || fail "missing path message"
echo "tracectl verify: all checks passed"
