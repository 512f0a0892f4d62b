#!/usr/bin/env bash
# Attach → first event, as a user sees it (root):
#   tests/bench/first_event.sh [build-dir] [runs]   # TRACECTL=path, LOAD=N busy loops beside
# A demo app is traced for 1 s by an embedded tracectl, RUNS times; each run
# prints the milliseconds from just before tracectl starts to the trace's
# first event (time order; process and thread descriptions aside). With
# LOAD=N, N busy loops keep the CPUs saturated meanwhile.
set -euo pipefail
build=${1:-build}
runs=${2:-3}
tracectl=$(realpath "${TRACECTL:-$build/tools/tracectl/tracectl}")
tmp=$(mktemp -d)
export LOUPE_SOCKET=$tmp/no-louped.sock  # embedded: the tracer is tracectl itself
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$tmp"' EXIT

"$build/tests/testprogs/loupe-demo-app" 600 > "$tmp/app.out" &
app=$!
for _ in $(seq 1 50); do grep -q ready "$tmp/app.out" && break; sleep 0.1; done
for _ in $(seq 1 "${LOAD:-0}"); do (while :; do :; done) & done
sleep 1
monotonic_ns() { python3 -c 'import time; print(time.monotonic_ns())'; }
for run in $(seq 1 "$runs"); do
  start=$(monotonic_ns)
  "$tracectl" attach -d 1s -o "$tmp/trace.$run" "$app" > "$tmp/log.$run" 2>&1 || true
  first=$("$tracectl" export --format json -o - "$tmp/trace.$run" 2> /dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    event = json.loads(line)
    if event["kind"] not in ("process_info", "thread_info"):
        print(event["time_ns"]); break' || true)  # tracectl dies of SIGPIPE once it is read
  [ -n "$first" ] || { echo "run $run: no event"; cat "$tmp/log.$run"; exit 1; }
  echo "run $run: first event $(( (first - start) / 1000000 )) ms after tracectl started"
done
