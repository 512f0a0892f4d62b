#!/usr/bin/env bash
# Shipping end to end, louped -> loupe-collector on 127.0.0.1, real processes:
#  1. every segment arrives once with the same sha256 (copies kept), and
#     without keep_shipped the local files go once acknowledged;
#  2. the collector SIGKILLed mid-upload and restarted: the upload resumes,
#     nothing is duplicated or left half-written;
#  3. the collector down longer than the disk budget lasts: the oldest
#     segments are evicted, `tracectl verify --collector` shows it, and
#     shipping resumes when the collector returns;
#  4. louped SIGKILLed with unshipped segments: the next louped ships them
#     (the interrupted active file too);
#  5. no token, a wrong token (also as louped's status), a token not allowed
#     to read this host, plaintext against TLS and an untrusted certificate:
#     refused with a clear error;
#  6. two collectors on one store folder, louped shipping to the list of
#     both: the collector receiving an upload SIGKILLed mid-upload, the
#     upload finished through the other, each segment stored once.
set -euo pipefail
louped=$1 tracectl=$2 collector=$3 app=$4
fail() {
  echo "FAIL: $*"
  for log in louped collector; do
    [ -f "$work/$log.log" ] && { echo "--- $log.log (end)"; tail -n 15 "$work/$log.log"; }
  done
  exit 1
}
work=
if [ "$(id -u)" != 0 ]; then
  [ "${LOUPE_REQUIRE_PRIVILEGED:-}" = 1 ] && fail "needs root (LOUPE_REQUIRE_PRIVILEGED=1)"
  echo "SKIP: needs root to load BPF"; exit 77
fi

work=$(mktemp -d)
store="$work/store" traces="$work/traces" sock="$work/louped.sock"
token=shipper-token-0123456789
reader_token=reader-token-0123456789
printf '%s\n' "daemon-a $token upload=* read=*" "reader $reader_token upload= read=other-*" \
  > "$work/tokens"
echo "$token" > "$work/token"
echo "$reader_token" > "$work/reader_token"
echo "wrong-token-9876543210" > "$work/wrong_token"
coll= daemon= app_pid=
cleanup() { kill -9 $coll $daemon $app_pid 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# Bounded waits: each gives up after 60 s. The condition is evaluated anew
# on every round, so pass it quoted.
wait_until() {
  local what=$1 condition=$2
  for _ in $(seq 600); do eval "$condition" && return 0; sleep 0.1; done
  fail "timed out waiting for $what"
}
start_collector() {  # extra flags...
  rm -f "$work/port"
  "$collector" --listen "127.0.0.1:${port:-0}" --port-file "$work/port" --store "$store" \
    --tokens-file "$work/tokens" "$@" >> "$work/collector.log" 2>&1 &
  coll=$!
  wait_until "the collector's port" 'test -s "$work/port"'
  port=$(cat "$work/port")
}
start_louped() {  # extra flags...
  "$louped" --socket "$sock" --output-dir "$traces" --collector "${collectors:-127.0.0.1:$port}" \
    --collector-token-file "${louped_token:-$work/token}" --max-file-size 65536 --rotation-period-s 1 \
    --ship-retry-max-s 1 "$@" >> "$work/louped.log" 2>&1 &
  daemon=$!
  wait_until "louped's socket" 'test -S "$sock"'
}
stop_louped() { kill -TERM "$daemon"; wait "$daemon" || fail "louped exited $?"; daemon=; }
T() { "$tracectl" --socket "$sock" "$@"; }
C() { "$tracectl" "$@" --collector "127.0.0.1:$port" --collector-token-file "$work/token"; }
stored() { find "$store" -name "*@$1@*.loupe" | wc -l; }
local_count() { find "$traces" -maxdepth 1 -name "$1-*.loupe" | wc -l; }
# Each sequence number of session $1 stored exactly once.
once_each() {
  local dupes
  dupes=$(find "$store" -name "*@$1@*.loupe" | awk -F@ '{print $3}' | sort | uniq -d)
  [ -z "$dupes" ] || fail "session $1: sequences stored twice: $dupes"
}

"$app" 300 > "$work/app.out" &
app_pid=$!
wait_until "the demo app" 'grep -q ready "$work/app.out"'
start_collector

# 1. Exactly once, same digest; local copies kept, then not.
start_louped --keep-shipped 1
T attach "$app_pid" --session-id kept --duration 2s -q > /dev/null
n=$(local_count kept)
[ "$n" -ge 3 ] || fail "expected several segments, got $n"
wait_until "kept segments shipped" 'test "$(stored kept)" = "$n"'
once_each kept
for f in "$traces"/kept-*.loupe; do
  seq=$(basename "$f" .loupe); seq=${seq#kept-}
  remote=$(find "$store" -name "*@kept@$seq@*.loupe")
  [ "$(sha256sum < "$f")" = "$(sha256sum < "$remote")" ] || fail "$f differs from $remote"
  [ -e "$traces/.shipped/$(basename "$f")" ] || fail "$f is not marked shipped"
done
T status > "$work/status.out"
grep -q "shipping to 127.0.0.1:$port: 0 segment(s) queued" "$work/status.out" \
  || fail "status: $(cat "$work/status.out")"
stop_louped
start_louped
T attach "$app_pid" --session-id plain --duration 2s -q > /dev/null
wait_until "plain segments shipped and deleted" 'test "$(local_count plain)" = 0'
once_each plain
C verify --session plain > "$work/plain.verify" || fail "$(cat "$work/plain.verify")"
grep -q "^COMPLETE: $(stored plain) segment(s)" "$work/plain.verify" || fail "$(cat "$work/plain.verify")"
C report --session plain --since 10m > "$work/plain.report" || fail "report --collector: $(cat "$work/plain.report")"
grep -q "loupe-demo-app" "$work/plain.report" || fail "report --collector: $(cat "$work/plain.report")"
C export --session plain --format json -o "$work/plain.jsonl" || fail "export --collector failed"
[ -s "$work/plain.jsonl" ] || fail "export --collector wrote nothing"
# The fetched segments' symbol tables name the stacks (libc's usleep, under
# which the demo's workers sleep).
C export --session plain --format perfetto --compress none -o "$work/plain.pftrace" \
  || fail "export --collector --format perfetto failed"
grep -aq usleep "$work/plain.pftrace" || fail "export --collector --format perfetto: stacks not named"
stop_louped
echo "shipping: exactly once, same digest, local copies released"

# 2. The collector dies mid-upload; the upload resumes after restarting it.
start_louped --ship-rate-limit 20000
T attach "$app_pid" --session-id slow --duration 1s -q > /dev/null
partial() { find "$store/.staging" -name "*@slow@*.partial" -size +8k | grep -q .; }
wait_until "a partly staged upload" 'partial'
kill -9 "$coll"; wait "$coll" 2>/dev/null || true
for f in $(find "$store" -name "*@slow@*.loupe"); do
  "$tracectl" verify "$f" > /dev/null || fail "the collector holds a damaged $f"
done
start_collector
wait_until "slow segments shipped" 'test "$(local_count slow)" = 0'
once_each slow
grep -q "resumed after [1-9][0-9]* of" "$work/louped.log" || fail "no upload resumed: $(cat "$work/louped.log")"
C verify --session slow > "$work/slow.verify" || fail "$(cat "$work/slow.verify")"
stop_louped
echo "shipping: an upload cut by SIGKILL resumed"

# 3. The collector is down longer than the disk budget lasts.
kill -TERM "$coll"; wait "$coll" || true
start_louped --max-total-size 262144
T attach "$app_pid" --session-id flood --duration 5s -q > /dev/null || true
T status > "$work/down.status"
grep -q "last error" "$work/down.status" || fail "status shows no error: $(cat "$work/down.status")"
grep -q "is loupe-collector running there" "$work/down.status" || fail "$(cat "$work/down.status")"
start_collector
wait_until "flood segments shipped" 'test "$(local_count flood)" = 0'
once_each flood
set +e
C verify --session flood > "$work/flood.verify"
code=$?
set -e
[ "$code" = 1 ] || fail "verify of an evicted trace exited $code: $(cat "$work/flood.verify")"
grep -q "lost [0-9]* (writer/segment_evicted)" "$work/flood.verify" || fail "$(cat "$work/flood.verify")"
stop_louped
echo "shipping: evictions while the collector was down are in the trace"

# 4. louped dies with segments unshipped; the next one ships them.
kill -TERM "$coll"; wait "$coll" || true
start_louped
T attach "$app_pid" --session-id crash -q > /dev/null 2>&1 &
attach=$!
wait_until "sealed crash segments" 'test "$(local_count crash)" -ge 3'
kill -9 "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=
wait "$attach" 2>/dev/null || true
rm -f "$sock"
before=$(find "$traces" -maxdepth 1 -name "crash-*.loupe*" | wc -l)
start_collector
start_louped
wait_until "crash segments shipped" 'test "$(find "$traces" -maxdepth 1 -name "crash-*" | wc -l)" = 0'
once_each crash
[ "$(stored crash)" = "$before" ] || fail "$before crash segments on disk, $(stored crash) stored"
stop_louped
echo "shipping: a restarted louped shipped what the killed one left"

# 5. Authentication and TLS.
set +e
"$tracectl" verify --collector "127.0.0.1:$port" > /dev/null 2> "$work/anon.err"; anon=$?
"$tracectl" verify --collector "127.0.0.1:$port" --collector-token-file "$work/wrong_token" \
  > /dev/null 2> "$work/wrong.err"; wrong=$?
set -e
[ "$anon" = 2 ] && grep -q "no bearer token" "$work/anon.err" || fail "no token: $(cat "$work/anon.err")"
[ "$wrong" = 2 ] && grep -q "not one this collector accepts" "$work/wrong.err" \
  || fail "wrong token: $(cat "$work/wrong.err")"
set +e
"$tracectl" verify --collector "127.0.0.1:$port" --collector-token-file "$work/reader_token" \
  --host "$(hostname)" > /dev/null 2> "$work/reader.err"
set -e
grep -q "client reader may not list segments of host $(hostname) (the tokens file grants it read=other-\*)" \
  "$work/reader.err" || fail "reader: $(cat "$work/reader.err")"
louped_token="$work/wrong_token" start_louped
T attach "$app_pid" --session-id refused --duration 1s -q > /dev/null
wait_until "louped to report the refusal" 'T status | grep -q "not one this collector accepts"'
stop_louped
kill -TERM "$coll"; wait "$coll" || true

for name in server other; do
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=loupe-$name" \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$work/$name.key" -out "$work/$name.pem" 2> /dev/null
done
start_collector --tls-cert "$work/server.pem" --tls-key "$work/server.key"
C verify --session plain --collector-ca "$work/server.pem" > /dev/null \
  || fail "verify over TLS with the right CA failed"
set +e
C verify --session plain > /dev/null 2> "$work/plain_to_tls.err"; plain=$?
C verify --session plain --collector-ca "$work/other.pem" > /dev/null 2> "$work/untrusted.err"; untrusted=$?
set -e
[ "$plain" = 2 ] && grep -q "without TLS?" "$work/plain_to_tls.err" \
  || fail "plaintext to TLS: $(cat "$work/plain_to_tls.err")"
[ "$untrusted" = 2 ] && grep -q "certificate signed by $work/other.pem" "$work/untrusted.err" \
  || fail "untrusted certificate: $(cat "$work/untrusted.err")"
echo "shipping: tokens, grants and TLS enforced"

# 6. Two collectors on one store folder. B's port is learnt first and B
# started only once A holds a partial upload, so the cut is A's for sure.
kill -TERM "$coll"; wait "$coll" || true
port=; start_collector; port_b=$port
kill -TERM "$coll"; wait "$coll" || true
port=; start_collector; port_a=$port coll_a=$coll
collectors="127.0.0.1:$port_a,127.0.0.1:$port_b" start_louped --ship-rate-limit 20000
T attach "$app_pid" --session-id twin --duration 1s -q > /dev/null
twin_partial() { find "$store/.staging" -name "*@twin@*.partial" -size +8k | grep -q .; }
wait_until "a partly staged upload on collector A" 'twin_partial'
port=$port_b; start_collector
kill -9 "$coll_a"; wait "$coll_a" 2>/dev/null || true
wait_until "twin segments shipped through collector B" 'test "$(local_count twin)" = 0'
once_each twin
grep -q "twin-[0-9]*.loupe stored, resumed after [1-9][0-9]* of" "$work/louped.log" \
  || fail "no twin upload resumed on collector B: $(grep twin "$work/louped.log")"
"$tracectl" verify --session twin --collector "127.0.0.1:$port_a,127.0.0.1:$port_b" \
  --collector-token-file "$work/token" > "$work/twin.verify" || fail "$(cat "$work/twin.verify")"
grep -q "^COMPLETE: $(stored twin) segment(s)" "$work/twin.verify" || fail "$(cat "$work/twin.verify")"
stop_louped
echo "shipping: an upload cut on one collector finished through the other"
echo "shipping: all checks passed"
