#!/usr/bin/env bash
# Two loupe-collectors on one S3 bucket (OpenStack Swift's s3api, started
# here on 127.0.0.1), segments uploaded with the shipper's code:
#  1. uploads through either collector are listed and read through both;
#  2. a collector SIGKILLed mid-upload (a part stored): the upload resumes
#     through the other from the stored parts, is stored once, same digest;
#  3. a collector restarted with nothing but the bucket serves it all;
#  4. listing by host and time (tracectl verify/report --collector);
#  5. retention deletes the oldest objects;
#  6. a wrong secret, missing credentials or a bad bucket: a clear refusal.
# Needs Debian's swift-{proxy,account,container,object}: without them a skip
# (exit 77), or a failure under LOUPE_REQUIRE_PRIVILEGED=1 (CI).
set -euo pipefail
collector=$1 tracectl=$2 uploader=$3 support=$4
work=$(mktemp -d)
pids=()
fail() {
  echo "FAIL: $*"
  for log in "$work"/*.log "$work"/swift/*.log; do
    [ -s "$log" ] && { echo "--- $log (end)"; tail -n 15 "$log"; }
  done
  exit 1
}
cleanup() {
  for pid in "${pids[@]}" $(cat "$work/swift/swift.pids" 2>/dev/null); do
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

mkdir "$work/swift"
set +e
"$support/start_swift.sh" "$work/swift" loupe-test > "$work/start_swift.out" 2>&1
started=$?
set -e
if [ "$started" = 77 ]; then
  [ "${LOUPE_REQUIRE_PRIVILEGED:-}" = 1 ] && fail "$(cat "$work/start_swift.out") (LOUPE_REQUIRE_PRIVILEGED=1)"
  echo "SKIP: $(cat "$work/start_swift.out")"; exit 77
fi
[ "$started" = 0 ] || fail "swift: $(cat "$work/start_swift.out")"
set -a; . "$work/swift/swift.env"; set +a

token=shipper-token-0123456789
echo "shipper $token upload=test-host read=*" > "$work/tokens"
echo "$token" > "$work/token"
s3=(--store s3://loupe-test/fleet --s3-endpoint "$S3_ENDPOINT" --s3-region "$S3_REGION"
    --s3-part-size 5242880)

wait_until() {  # what condition: bounded (60 s), the condition re-evaluated each round
  local what=$1 condition=$2
  for _ in $(seq 600); do eval "$condition" && return 0; sleep 0.1; done
  fail "timed out waiting for $what"
}
declare -A port pid
start_collector() {  # name extra-flags...
  local name=$1; shift
  rm -f "$work/$name.port"
  "$collector" --listen 127.0.0.1:0 --port-file "$work/$name.port" --tokens-file "$work/tokens" \
    "${s3[@]}" "$@" >> "$work/$name.log" 2>&1 &
  pid[$name]=$!; pids+=($!)
  wait_until "collector $name's port" "test -s '$work/$name.port' || ! kill -0 ${pid[$name]}"
  kill -0 "${pid[$name]}" 2>/dev/null || fail "collector $name exited: $(tail -n 3 "$work/$name.log")"
  port[$name]=$(cat "$work/$name.port")
}
send() {  # collector-name rate files...
  local name=$1 rate=$2; shift 2
  "$uploader" send "127.0.0.1:${port[$name]}" "$work/token" "$rate" "$@"
}
C() {  # collector-name tracectl-args...
  local name=$1; shift
  "$tracectl" "$@" --collector "127.0.0.1:${port[$name]}" --collector-token-file "$work/token"
}
count_of() { sed -n 's/^[A-Z]*: \([0-9]*\) segment(s).*/\1/p' "$1"; }

start_collector a --log-level debug
start_collector b

# 1. Small segments (one PUT each), half through each collector.
mapfile -t small < <("$uploader" write "$work/local" small 600000 262144)
[ "${#small[@]}" -ge 4 ] || fail "expected several small segments, got ${#small[@]}"
half=$((${#small[@]} / 2))
send a 0 "${small[@]:0:$half}" > "$work/send_small_a.out" || fail "send via a: $(cat "$work/send_small_a.out")"
send b 0 "${small[@]:$half}" > "$work/send_small_b.out" || fail "send via b: $(cat "$work/send_small_b.out")"
for name in a b; do
  C "$name" verify --session small > "$work/small_$name.verify" || fail "$(cat "$work/small_$name.verify")"
  [ "$(count_of "$work/small_$name.verify")" = "${#small[@]}" ] \
    || fail "collector $name lists: $(cat "$work/small_$name.verify")"
done
echo "object store: ${#small[@]} segments through two collectors, listed by both"

# 2. A multipart upload cut by SIGKILL after its first part, finished elsewhere.
mapfile -t big < <("$uploader" write "$work/local" big 4400000 16777216)
[ "${#big[@]}" -ge 1 ] && [ "$(stat -c %s "${big[0]}")" -gt 10485760 ] \
  || fail "expected a segment over 10 MiB, got $(stat -c %s "${big[0]}")"
send a 2000000 "${big[0]}" > "$work/send_big_a.out" 2>&1 &
cut=$!
wait_until "part 1 stored through a" "grep -q 'big@.*part 1 stored' '$work/a.log'"
kill -9 "${pid[a]}"; wait "${pid[a]}" 2>/dev/null || true
wait "$cut" && fail "the upload through a finished after a was killed: $(cat "$work/send_big_a.out")"
send b 0 "${big[0]}" > "$work/send_big_b.out" || fail "resume via b: $(cat "$work/send_big_b.out")"
resumed=$(sed -n 's/.*resumed_from=\([0-9]*\)/\1/p' "$work/send_big_b.out")
[ "$resumed" -ge 5242880 ] || fail "b did not resume from the stored part: $(cat "$work/send_big_b.out")"
digest=$(sha256sum < "${big[0]}" | cut -d' ' -f1)
grep -q "@$digest.loupe" "$work/send_big_b.out" || fail "stored under another digest: $(cat "$work/send_big_b.out")"
C b verify --session big > "$work/big.verify" || fail "$(cat "$work/big.verify")"
[ "$(count_of "$work/big.verify")" = 1 ] || fail "big stored other than once: $(cat "$work/big.verify")"
echo "object store: an upload cut after ${resumed} bytes through one collector finished through the other, stored once"

# 3. A restarted collector needs nothing but the bucket.
start_collector a
C a verify --host test-host > "$work/all.verify" || fail "$(cat "$work/all.verify")"
[ "$(count_of "$work/all.verify")" = $((${#small[@]} + 1)) ] || fail "$(cat "$work/all.verify")"
send a 0 "${small[0]}" > "$work/dup.out" || fail "duplicate: $(cat "$work/dup.out")"
# Both collectors as one address list: either answers.
"$tracectl" verify --host test-host --collector "127.0.0.1:${port[a]},127.0.0.1:${port[b]}" \
  --collector-token-file "$work/token" > "$work/both.verify" || fail "$(cat "$work/both.verify")"
[ "$(count_of "$work/both.verify")" = $((${#small[@]} + 1)) ] || fail "$(cat "$work/both.verify")"

# 4. Listing by host and time.
C a verify --host test-host --since 1h > "$work/recent.verify" || fail "$(cat "$work/recent.verify")"
[ "$(count_of "$work/recent.verify")" = $((${#small[@]} + 1)) ] || fail "since 1h: $(cat "$work/recent.verify")"
set +e
C a verify --host test-host --until 2001-01-01T00:00:00Z > "$work/old.verify" 2>&1
C b verify --host other-host > "$work/other.verify" 2>&1
set -e
grep -q "no segments" "$work/old.verify" || fail "until 2001: $(cat "$work/old.verify")"
grep -q "no segments" "$work/other.verify" || fail "other host: $(cat "$work/other.verify")"
C b report --host test-host --session big --since 1h > "$work/big.report" 2>&1 \
  || fail "report --collector: $(cat "$work/big.report")"
echo "object store: listing by host and time, report through the other collector"

# 5. Retention: a budget of the big segment and a little: the oldest go,
# as many as the sizes on disk here say.
big_bytes=$(stat -c %s "${big[0]}")
budget=$((big_bytes + 300000))
total=$big_bytes
for f in "${small[@]}"; do total=$((total + $(stat -c %s "$f"))); done
evictions=0
for f in "${small[@]}"; do
  [ "$total" -gt "$budget" ] || break
  total=$((total - $(stat -c %s "$f"))); evictions=$((evictions + 1))
done
kill -TERM "${pid[b]}"; wait "${pid[b]}" || true
start_collector b --max-total-size "$budget" --retention-interval 1
wait_until "$evictions evictions through b" "test \$(grep -c 'retention: evicted' '$work/b.log') -ge $evictions"
C a verify --host test-host > "$work/kept.verify" || true
kept=$(count_of "$work/kept.verify")
[ "$kept" = $((${#small[@]} + 1 - evictions)) ] || fail "expected $evictions evicted: $(cat "$work/kept.verify")"
C a verify --session big > "$work/big_kept.verify" || fail "the newest segment went: $(cat "$work/big_kept.verify")"
echo "object store: retention deleted the $evictions oldest of $((${#small[@]} + 1)) segments"

# 6. Bad configuration: refused at start, naming what is wrong.
refused() {  # expected-message env-settings... -- flags...
  local expected=$1 settings=(); shift
  while [ "$1" != -- ]; do settings+=("$1"); shift; done
  shift
  set +e
  env "${settings[@]}" "$collector" --listen 127.0.0.1:0 --tokens-file "$work/tokens" "$@" \
    > "$work/refused.out" 2>&1
  local code=$?
  set -e
  [ "$code" != 0 ] && grep -q "$expected" "$work/refused.out" \
    || fail "expected '$expected', got exit $code: $(cat "$work/refused.out")"
}
refused SignatureDoesNotMatch AWS_SECRET_ACCESS_KEY=wrong -- "${s3[@]}"
refused "no access key id" -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -- "${s3[@]}"
refused "bucket 'B'" -- --store s3://B
refused "NoSuchBucket" -- --store s3://no-such-bucket --s3-endpoint "$S3_ENDPOINT"
echo "object store: all checks passed"
