#!/usr/bin/env bash
# Resident memory of the tracer during one busy session at default settings
# (root):  tests/bench/memory_bench.sh [build-dir]
# Targets: the demo app and bench_work's ping-pong (a context switch every
# few microseconds), traced for DURATION with sched, cpu and shim through
# louped, then by tracectl in embedded mode. /proc/PID/status is sampled
# every 100 ms; printed: peak of VmRSS and its parts at that moment —
# anonymous (the tracer's own heap: decode, reorder, symbols, blocks), the
# BPF maps mapped in (the ring buffer, whose size is a setting) and the
# other file pages (the binaries, libraries and debug files) — VmHWM, and
# the RSS without the ring.
set -euo pipefail
build=${1:-build}
louped=$build/daemon/louped/louped
tracectl=$build/tools/tracectl/tracectl
demo=$build/tests/testprogs/loupe-demo-app
work=$build/tests/testprogs/bench_work
duration=${DURATION:-10s}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; wait 2> /dev/null || true; rm -rf "$tmp"' EXIT

# snapshot PID: "rss anon file shmem hwm bpf_maps" (KiB); bpf_maps: BPF
# maps mapped in (the ring buffer: the kernel maps its data pages twice).
snapshot() {
  local maps
  maps=$(awk '/^[0-9a-f]+-[0-9a-f]+ / {bpf = ($6 == "anon_inode:bpf-map")}
    /^Rss:/ && bpf {k += $2} END {print k + 0}' "/proc/$1/smaps" 2> /dev/null || echo 0)
  awk -v maps="$maps" '/^VmRSS/ {r=$2} /^RssAnon/ {a=$2} /^RssFile/ {f=$2} /^RssShmem/ {s=$2}
    /^VmHWM/ {h=$2} END {if (r) print r, a, f, s, h, maps}' "/proc/$1/status" 2> /dev/null || true
}
# sample PID OUT: a snapshot every 100 ms while PID lives.
sample() {
  while [ -e "/proc/$1/status" ]; do snapshot "$1" >> "$2"; sleep 0.1; done
}
report() {  # report NAME FILE
  sort -n -k1 "$2" | tail -n 1 | awk -v name="$1" '{printf "%-26s %8.1f %9.1f %10.1f %9.1f %8.1f %14.1f\n",
    name, $1 / 1024, $2 / 1024, $6 / 1024, ($3 - $6) / 1024, $5 / 1024, ($1 - $6) / 1024}'
}

"$demo" > "$tmp/demo.out" 2>&1 &
demo_pid=$!
"$work" pingpong 1000000000 0 > /dev/null 2>&1 &
pingpong_pid=$!
sleep 0.5

printf '%-26s %8s %9s %10s %9s %8s %14s\n' tracer "rss MiB" "anon MiB" "ring MiB" "file MiB" \
  "hwm MiB" "rss-ring MiB"

"$louped" --socket "$tmp/louped.sock" --output-dir "$tmp/louped-traces" --rotation-period-s 0 \
  > "$tmp/louped.log" 2>&1 &
daemon=$!
until [ -S "$tmp/louped.sock" ]; do sleep 0.05; done
sleep 1
snapshot "$daemon" > "$tmp/louped.idle"
"$tracectl" --socket "$tmp/louped.sock" attach -q -d "$duration" "$demo_pid" "$pingpong_pid" \
  > "$tmp/louped.attach" 2>&1 &
attach=$!
sample "$daemon" "$tmp/louped.busy" &
sampler=$!
wait "$attach" || true
kill "$sampler" 2> /dev/null || true
report "louped, idle" "$tmp/louped.idle"
report "louped, busy session" "$tmp/louped.busy"
grep -E "events|verdict" "$tmp/louped.attach" | sed 's/^/    /'
kill "$daemon"; wait "$daemon" 2> /dev/null || true

LOUPE_SOCKET=$tmp/no-louped.sock "$tracectl" attach -q -d "$duration" -o "$tmp/embedded-traces" \
  "$demo_pid" "$pingpong_pid" > "$tmp/embedded.attach" 2>&1 &
attach=$!
sample "$attach" "$tmp/embedded.busy"
wait "$attach" || true
report "tracectl embedded, busy" "$tmp/embedded.busy"
grep -E "events|verdict" "$tmp/embedded.attach" | sed 's/^/    /'
