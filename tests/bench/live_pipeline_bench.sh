#!/usr/bin/env bash
# The whole live path at increasing event rates (root): a generator process
# (event_generator: THREADS threads emitting shim span begin/end pairs at a
# chosen rate, sleeping between 1 ms batches) traced by `tracectl attach` in
# embedded mode, with the default sources (sched, cpu at 99 Hz, shim):
#   tests/bench/live_pipeline_bench.sh [build-dir]
#     THREADS (1: the other cpus for the tracer), SECONDS_PER_RATE (3), RATES ("100000 200000 400000 800000 0"; 0: as
#     fast as the threads can), RING (ring buffer bytes, tracectl's default when unset)
# For each rate: the shim events the generator produced (its own count), the
# shim events the trace holds and everything it holds, the events lost (every
# source, as `tracectl verify` states them), the rate reached, and the
# tracer's CPU time (GNU time) per million events written. Stops after the
# first rate with a loss. Prints figures only; nothing here asserts.
set -euo pipefail
build=${1:-build}
tracectl=$build/tools/tracectl/tracectl
generator=$build/tests/bench/event_generator
threads=${THREADS:-1}
seconds=${SECONDS_PER_RATE:-3}
rates=${RATES:-100000 200000 400000 800000 0}
ring_args=()
[ -n "${RING:-}" ] && ring_args=(--ring-buffer-size "$RING")
tmp=$(mktemp -d)
# tracectl traces in its own process (embedded mode), never through a louped
# that happens to listen on the default socket: GNU time measures the tracer.
export LOUPE_SOCKET=$tmp/no-louped.sock
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$tmp"' EXIT
for program in "$tracectl" "$generator" /usr/bin/time; do
  [ -x "$program" ] || { echo "missing $program"; exit 1; }
done

echo "$threads generator threads, $seconds s per rate, $(nproc) cpus"
printf '%10s %12s %12s %12s %10s %12s %12s %14s\n' "asked/s" "produced" "recorded" \
  "all events" "lost" "shim ev/s" "tracer cpu s" "M ev/cpu-s"
for rate in $rates; do
  rm -rf "$tmp/trace"
  # The generator waits for the tracer's probes before it starts its clock.
  "$generator" "$threads" "$rate" "$seconds" > "$tmp/produced" &
  generator_pid=$!
  /usr/bin/time -f "%U %S" -o "$tmp/time" "$tracectl" attach -q "${ring_args[@]}" \
    -d "$((seconds + 30))s" -o "$tmp/trace" "$generator_pid" > "$tmp/tracer.log" 2>&1 || true
  wait "$generator_pid"
  "$tracectl" verify "$tmp/trace" > "$tmp/verify" 2>&1 || true  # non-zero when incomplete
  produced=$(awk '{print $2}' "$tmp/produced")
  # Summed over the segments' "kinds:" lines; the last line holds the totals.
  recorded=$(grep -o 'span_\(begin\|end\)=[0-9]*' "$tmp/verify" | awk -F= '{s += $2} END {print s + 0}')
  read -r all lost < <(tail -n 1 "$tmp/verify" |
    sed -E 's/.* ([0-9]+) events, ([0-9]+) lost.*/\1 \2/')
  cpu=$(tail -n 1 "$tmp/time" | awk '{printf "%.2f", $1 + $2}')
  printf '%10s %12d %12d %12d %10d %12.0f %12s %14.2f\n' "$([ "$rate" = 0 ] && echo max || echo "$rate")" \
    "$produced" "$recorded" "$all" "$lost" "$(echo "$produced / $seconds" | bc -l)" "$cpu" \
    "$(echo "$all / $cpu / 1000000" | bc -l)"
  if [ "$lost" -gt 0 ]; then
    # Per source and reason, summed over the segments.
    awk '$1 == "lost" {n[$3] += $2} END {for (r in n) printf "    lost %d %s\n", n[r], r}' \
      "$tmp/verify" | sort -k3
    break
  fi
done
