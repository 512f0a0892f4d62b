#!/usr/bin/env bash
# tracectl verify on crafted segments (tests/support/crafted_segments.h):
# decompression bombs are "damaged" at a small peak RSS (they asked for up to
# gigabytes), duplicated, swapped and dropped frames are INCOMPLETE naming the
# frame, and a fifo is refused at once instead of hanging.
set -euo pipefail
tracectl=$1 write_crafted=$2
max_rss_kb=${LOUPE_MAX_VERIFY_RSS_KB:-102400}  # 100 MiB
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ -x /usr/bin/time ] || fail "/usr/bin/time (GNU time) is needed to measure peak RSS"

"$write_crafted" "$work/c" > "$work/crafted.out" || fail "write_crafted_segments failed"

# verify FILE: sets code, rss_kb; output in $work/verify.out.
verify() {
  set +e
  /usr/bin/time -f %M -o "$work/rss" timeout 60 "$tracectl" verify "$1" > "$work/verify.out" 2>&1
  code=$?
  set -e
  rss_kb=$(tail -1 "$work/rss")
}

verify "$work/c/healthy.loupe"
[ "$code" = 0 ] || fail "healthy segment: exit $code: $(cat "$work/verify.out")"

checked=0
for file in "$work"/c/*-bomb-*.loupe "$work"/c/string-pile-*.loupe "$work"/c/size-lie-*.loupe; do
  name=$(basename "$file")
  verify "$file"
  printf '%-30s %6d KB peak RSS  %s\n' "$name" "$rss_kb" \
    "$(grep -m1 -o 'damaged: .*' "$work/verify.out" | cut -c1-110)"
  [ "$code" = 1 ] || fail "$name: exit $code, want 1: $(cat "$work/verify.out")"
  grep -q "^INCOMPLETE" "$work/verify.out" || fail "$name: not INCOMPLETE"
  grep -q "damaged: " "$work/verify.out" || fail "$name: no damaged reason: $(cat "$work/verify.out")"
  [ "$rss_kb" -lt "$max_rss_kb" ] || fail "$name: peak RSS $rss_kb KB, over $max_rss_kb KB"
  checked=$((checked + 1))
done
[ "$checked" -ge 14 ] || fail "only $checked bombs written: $(cat "$work/crafted.out")"

for case in "duplicated:frame #2 again where frame #3 was expected" \
            "swapped:frame #3 where frame #2 was expected" \
            "dropped:frame #4 where frame #3 was expected: frame #3 is missing" \
            "dropped-last:frame #5 where frame #4 was expected: frame #4 is missing"; do
  name=${case%%:*} reason=${case#*:}
  verify "$work/c/$name.loupe"
  [ "$code" = 1 ] || fail "$name: exit $code, want 1: $(cat "$work/verify.out")"
  grep -q "^INCOMPLETE" "$work/verify.out" || fail "$name: not INCOMPLETE"
  grep -qF "$reason" "$work/verify.out" || fail "$name: reason missing: $(cat "$work/verify.out")"
done

mkfifo "$work/x.loupe"
verify "$work/x.loupe"
[ "$code" = 1 ] || fail "fifo: exit $code, want 1 (124 is a hang): $(cat "$work/verify.out")"
grep -q "a fifo, not a regular file" "$work/verify.out" || fail "fifo: $(cat "$work/verify.out")"
echo "tracectl bounded reading: all checks passed"
