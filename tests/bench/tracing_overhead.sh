#!/usr/bin/env bash
# Tracing overhead, Loupe next to perf, measured in one run (root):
#   tests/bench/tracing_overhead.sh [build-dir]
# For each case the target's own elapsed time for a fixed amount of work is
# measured untraced and under each tracer, alternating, and the median of
# the repeats is printed with the slowdown: of the target's CPU time for the
# CPU-bound case (sampling costs land there; wall time on a shared machine is
# mostly noise), of wall time for the ping-pong (it is latency-bound). Tracer
# CPU and peak RSS come from GNU time.
set -euo pipefail
build=${1:-build}
tracectl=$build/tools/tracectl/tracectl
work=$build/tests/testprogs/bench_work
repeats=${REPEATS:-5}
cpu_iterations=${CPU_ITERATIONS:-2000000000}
pingpong_rounds=${PINGPONG_ROUNDS:-200000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v perf > /dev/null || { echo "perf is needed (linux-perf)"; exit 1; }

# run_case NAME MODE N TRACER...: records the target's elapsed and cpu ns; the tracer
# (if any) gets the target's pid appended and its GNU time figures saved.
run_case() {
  local name=$1 mode=$2 n=$3; shift 3
  "$work" "$mode" "$n" 1.5 > "$tmp/elapsed" &
  local target=$!
  if [ $# -gt 0 ]; then
    /usr/bin/time -f "%U %S %M" -o "$tmp/$name.time" "$@" "$target" > /dev/null 2>&1 &
    local tracer=$!
    wait "$target"; wait "$tracer" || true
    cat "$tmp/$name.time" >> "$tmp/$name.times"
  else
    wait "$target"
  fi
  cat "$tmp/elapsed" >> "$tmp/$name.elapsed"
}

median() { awk -v c="$2" '{print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

report() {  # report COLUMN(1 wall, 2 cpu) BASELINE NAME...
  local column=$1; shift
  local base; base=$(median "$tmp/$1.elapsed" "$column"); shift
  printf '%-34s %12s %10s %12s %10s\n' case "$([ "$column" = 1 ] && echo wall || echo cpu) ms" \
    slowdown "tracer cpu s" "rss MiB"
  for name in "$@"; do
    local t; t=$(median "$tmp/$name.elapsed" "$column")
    local cpu="-" rss="-"
    if [ -f "$tmp/$name.times" ]; then
      cpu=$(awk '{s+=$1+$2} END {printf "%.2f", s/NR}' "$tmp/$name.times")
      rss=$(awk '{if ($3>m) m=$3} END {printf "%.1f", m/1024}' "$tmp/$name.times")
    fi
    printf '%-34s %12.1f %9.2f%% %12s %10s\n' "$name" "$(echo "$t/1000000" | bc -l)" \
      "$(echo "($t-$base)*100/$base" | bc -l)" "$cpu" "$rss"
  done
  echo
}

echo "CPU-bound target: $cpu_iterations iterations, median of $repeats"
for _ in $(seq "$repeats"); do
  run_case cpu_untraced cpu "$cpu_iterations"
  run_case cpu_loupe_99hz cpu "$cpu_iterations" "$tracectl" attach -q --sources cpu --hz 99 -o "$tmp/t"
  run_case cpu_perf_99hz cpu "$cpu_iterations" perf record -q -F 99 -g -o "$tmp/perf.data" -p
  run_case cpu_loupe_999hz cpu "$cpu_iterations" "$tracectl" attach -q --sources cpu --hz 999 -o "$tmp/t"
  run_case cpu_perf_999hz cpu "$cpu_iterations" perf record -q -F 999 -g -o "$tmp/perf.data" -p
done
report 2 cpu_untraced cpu_untraced cpu_loupe_99hz cpu_perf_99hz cpu_loupe_999hz cpu_perf_999hz

echo "Pipe ping-pong: $pingpong_rounds round trips, median of $repeats"
for _ in $(seq "$repeats"); do
  run_case pp_untraced pingpong "$pingpong_rounds"
  run_case pp_loupe_sched pingpong "$pingpong_rounds" "$tracectl" attach -q --sources sched -o "$tmp/t"
  run_case pp_perf_sched pingpong "$pingpong_rounds" \
    perf record -q -e sched:sched_switch -e sched:sched_wakeup -o "$tmp/perf.data" -p
  run_case pp_perf_sched_stacks pingpong "$pingpong_rounds" \
    perf record -q -g -e sched:sched_switch -e sched:sched_wakeup -o "$tmp/perf.data" -p
  run_case pp_loupe_sched_kernel_stacks pingpong "$pingpong_rounds" \
    "$tracectl" attach -q --sources sched --offcpu-stacks kernel -o "$tmp/t"
  run_case pp_loupe_sched_no_stacks pingpong "$pingpong_rounds" \
    "$tracectl" attach -q --sources sched --offcpu-stacks none -o "$tmp/t"
done
report 1 pp_untraced pp_untraced pp_loupe_sched pp_perf_sched_stacks pp_loupe_sched_kernel_stacks \
  pp_loupe_sched_no_stacks pp_perf_sched

# What each BPF program costs per run, from the kernel's own accounting: a
# figure the machine's noise does not blur. At 99 Hz the sampler's share of
# a CPU is (ns per sample) x 99 / 1e9.
echo "BPF program cost (kernel.bpf_stats_enabled), CPU-bound target at 999 Hz + ping-pong"
previous_stats=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -qw kernel.bpf_stats_enabled=1
"$work" cpu "$cpu_iterations" 1.5 > /dev/null &
target=$!
"$tracectl" attach -q --hz 999 -o "$tmp/t" "$target" > /dev/null 2>&1 &
tracer=$!
sleep 2.5
bpftool prog show 2> /dev/null | awk '/name handle_cpu_sample/ {
  for (i = 1; i <= NF; ++i) { if ($i == "run_time_ns") t = $(i+1); if ($i == "run_cnt") n = $(i+1) }
  if (n > 0) printf "handle_cpu_sample: %d runs, %.0f ns each; at 99 Hz %.4f %% of a cpu\n", n, t / n, t / n * 99 / 1e7 }'
wait "$target" "$tracer" || true
for stacks in user,kernel kernel none; do
  "$work" pingpong "$pingpong_rounds" 1.5 > /dev/null &
  target=$!
  "$tracectl" attach -q --sources sched --offcpu-stacks "$stacks" -o "$tmp/t" "$target" > /dev/null 2>&1 &
  tracer=$!
  sleep 2.5
  bpftool prog show 2> /dev/null | awk -v stacks="$stacks" '/name handle_sched_switch / {
    for (i = 1; i <= NF; ++i) { if ($i == "run_time_ns") t = $(i+1); if ($i == "run_cnt") n = $(i+1) }
    if (n > 0) printf "handle_sched_switch (offcpu stacks %s): %d runs, %.0f ns each\n", stacks, n, t / n }'
  wait "$target" "$tracer" || true
done
sysctl -qw kernel.bpf_stats_enabled="$previous_stats"
