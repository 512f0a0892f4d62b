#!/usr/bin/env bash
# Tracing overhead, Loupe next to perf, measured in one run (root):
#   tests/bench/tracing_overhead.sh [build-dir]
# For each case the target's own elapsed time for a fixed amount of work is
# measured untraced and under each tracer, alternating, and the median of
# the repeats is printed with the slowdown: of the target's CPU time for the
# CPU-bound case (sampling costs land there; wall time on a shared machine is
# mostly noise), of wall time for the ping-pong (it is latency-bound). Tracer
# CPU (mean) and peak RSS come from GNU time; a tracer that exits non-zero
# (tracectl: the trace is incomplete, e.g. the ring buffer overflowed) is
# counted in the last column. Then the kernel's own accounting of each BPF
# program of the tracer (kernel.bpf_stats_enabled), one line per case.
set -euo pipefail
build=${1:-build}
tracectl=$build/tools/tracectl/tracectl
work=$build/tests/testprogs/bench_work
repeats=${REPEATS:-5}
cpu_iterations=${CPU_ITERATIONS:-2000000000}
pingpong_rounds=${PINGPONG_ROUNDS:-200000}
tmp=$(mktemp -d)
# tracectl traces in its own process (embedded mode), never through a louped
# that happens to listen on the default socket: GNU time measures the tracer.
export LOUPE_SOCKET=$tmp/no-louped.sock
previous_stats=$(sysctl -n kernel.bpf_stats_enabled)
# Interrupted: stop this script's own targets and tracers (its jobs) too.
trap 'kill $(jobs -p) 2> /dev/null || true; sysctl -qw kernel.bpf_stats_enabled="$previous_stats"; rm -rf "$tmp"' EXIT
command -v perf > /dev/null || { echo "perf is needed (linux-perf)"; exit 1; }
command -v bpftool > /dev/null || { echo "bpftool is needed"; exit 1; }

# run_case NAME MODE N TRACER...: records the target's elapsed and cpu ns; the tracer
# (if any) gets the target's pid appended, its GNU time figures and exit status saved.
run_case() {
  local name=$1 mode=$2 n=$3; shift 3
  "$work" "$mode" "$n" 1.5 > "$tmp/elapsed" &
  local target=$!
  if [ $# -gt 0 ]; then
    /usr/bin/time -f "%U %S %M" -o "$tmp/$name.time" "$@" "$target" > /dev/null 2>&1 &
    local tracer=$! status=0
    wait "$target"; wait "$tracer" || status=$?
    # GNU time writes "Command exited with non-zero status N" (or "Command
    # terminated by signal N") before the figures: keep the figures' line.
    tail -n 1 "$tmp/$name.time" >> "$tmp/$name.times"
    echo "$status" >> "$tmp/$name.status"
  else
    wait "$target"
  fi
  cat "$tmp/elapsed" >> "$tmp/$name.elapsed"
}

median() { awk -v c="$2" '{print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
range() { awk -v c="$2" '{print $c}' "$1" | sort -n | awk 'NR == 1 {lo = $1} {hi = $1}
  END {printf "%.0f-%.0f", lo / 1e6, hi / 1e6}'; }

report() {  # report COLUMN(1 wall, 2 cpu) BASELINE NAME...
  local column=$1; shift
  local base; base=$(median "$tmp/$1.elapsed" "$column"); shift
  printf '%-34s %12s %10s %14s %12s %10s %9s\n' case "$([ "$column" = 1 ] && echo wall || echo cpu) ms" \
    slowdown "range ms" "tracer cpu s" "rss MiB" "exit!=0"
  for name in "$@"; do
    local t; t=$(median "$tmp/$name.elapsed" "$column")
    local cpu="-" rss="-" failed="-"
    if [ -f "$tmp/$name.times" ]; then
      cpu=$(awk 'NF == 3 {s += $1 + $2; ++n} END {if (n) printf "%.2f", s / n; else print "-"}' \
        "$tmp/$name.times")
      rss=$(awk 'NF == 3 && $3 + 0 > m {m = $3 + 0} END {if (m) printf "%.1f", m / 1024; else print "-"}' \
        "$tmp/$name.times")
      failed=$(awk '$1 != 0 {++k} END {printf "%d/%d", k, NR}' "$tmp/$name.status")
    fi
    printf '%-34s %12.1f %9.2f%% %14s %12s %10s %9s\n' "$name" "$(echo "$t/1000000" | bc -l)" \
      "$(echo "($t-$base)*100/$base" | bc -l)" "$(range "$tmp/$name.elapsed" "$column")" "$cpu" "$rss" \
      "$failed"
  done
  echo
}

echo "CPU-bound target: $cpu_iterations iterations, median of $repeats"
for _ in $(seq "$repeats"); do
  run_case cpu_untraced cpu "$cpu_iterations"
  run_case cpu_loupe_99hz cpu "$cpu_iterations" "$tracectl" attach -q --sources cpu --hz 99 -o "$tmp/t"
  run_case cpu_perf_99hz cpu "$cpu_iterations" perf record -q -F 99 -g -o "$tmp/perf.data" -p
  run_case cpu_loupe_999hz cpu "$cpu_iterations" "$tracectl" attach -q --sources cpu --hz 999 -o "$tmp/t"
  run_case cpu_loupe_999hz_unwind_fp cpu "$cpu_iterations" \
    "$tracectl" attach -q --sources cpu --hz 999 --unwind fp -o "$tmp/t"
  run_case cpu_perf_999hz cpu "$cpu_iterations" perf record -q -F 999 -g -o "$tmp/perf.data" -p
done
report 2 cpu_untraced cpu_untraced cpu_loupe_99hz cpu_perf_99hz cpu_loupe_999hz \
  cpu_loupe_999hz_unwind_fp cpu_perf_999hz

echo "Pipe ping-pong: $pingpong_rounds round trips, median of $repeats"
for _ in $(seq "$repeats"); do
  run_case pp_untraced pingpong "$pingpong_rounds"
  run_case pp_loupe_sched pingpong "$pingpong_rounds" "$tracectl" attach -q --sources sched -o "$tmp/t"
  run_case pp_loupe_sched_unwind_fp pingpong "$pingpong_rounds" \
    "$tracectl" attach -q --sources sched --unwind fp -o "$tmp/t"
  run_case pp_perf_sched pingpong "$pingpong_rounds" \
    perf record -q -e sched:sched_switch -e sched:sched_wakeup -o "$tmp/perf.data" -p
  run_case pp_perf_sched_stacks pingpong "$pingpong_rounds" \
    perf record -q -g -e sched:sched_switch -e sched:sched_wakeup -o "$tmp/perf.data" -p
  run_case pp_loupe_sched_kernel_stacks pingpong "$pingpong_rounds" \
    "$tracectl" attach -q --sources sched --offcpu-stacks kernel -o "$tmp/t"
  run_case pp_loupe_sched_no_stacks pingpong "$pingpong_rounds" \
    "$tracectl" attach -q --sources sched --offcpu-stacks none -o "$tmp/t"
done
report 1 pp_untraced pp_untraced pp_loupe_sched pp_loupe_sched_unwind_fp pp_perf_sched_stacks \
  pp_loupe_sched_kernel_stacks pp_loupe_sched_no_stacks pp_perf_sched

# What each BPF program costs per run, from the kernel's own accounting: a
# figure the machine's noise does not blur. At 99 Hz the sampler's share of
# a CPU is (ns per target sample) x 99 / 1e9. Only the programs the case's own
# tracectl holds open count (bpftool lists every loaded copy: other
# sessions', tests'), found through /proc/PID/fdinfo.

# shellcheck source=prog_stats.sh
source "$(dirname "$0")/prog_stats.sh"

# bpf_case LABEL PROGRAM MODE N TRACECTL-ARGS...: the target does N units of work
# (far more than the 2.5 s of tracing need) and is stopped after the reading.
bpf_case() {
  local label=$1 program=$2 mode=$3 n=$4; shift 4
  rm -rf "$tmp/bpf"
  "$work" "$mode" "$n" 0 > /dev/null &
  local target=$!
  "$tracectl" attach -q "$@" -o "$tmp/bpf" "$target" > "$tmp/tracer.log" 2>&1 &
  local tracer=$!
  for _ in $(seq 100); do
    [ "$(prog_stats "$tracer" "$program" | awk '{print $3}')" -gt 0 ] && break
    sleep 0.1
  done
  sleep 2.5
  local runs ns programs
  read -r runs ns programs < <(prog_stats "$tracer" "$program")
  kill "$target"; wait "$target" 2> /dev/null || true
  wait "$tracer" || true
  if [ "$programs" -ne 1 ] || [ "$runs" -eq 0 ]; then
    printf '%-44s: %d programs, %d runs; tracectl said:\n' "$program ($label)" "$programs" "$runs"
    tail -n 3 "$tmp/tracer.log" | sed 's/^/  /'
    return
  fi
  bpf_ns[$label]=$((ns / runs))
  printf '%-44s: %8d runs, %6d ns each' "$program ($label)" "$runs" "$((ns / runs))"
  if [ "$program" = handle_cpu_sample ]; then
    # The sampler runs on every CPU and returns at once for other tasks:
    # per sample of the target is the figure that compares walks.
    local samples
    samples=$("$tracectl" export --format json -o - "$tmp/bpf" 2> /dev/null | grep -c '"kind":"cpu_sample"' || true)
    bpf_ns[$label]=$((ns / (samples > 0 ? samples : 1)))
    printf '; %d target samples, %d ns each; at 99 Hz %.4f %% of a cpu' "$samples" \
      "${bpf_ns[$label]}" "$(echo "${bpf_ns[$label]} * 99 / 10000000" | bc -l)"
  fi
  echo
}

echo "BPF program cost (kernel.bpf_stats_enabled), CPU-bound target at 999 Hz + ping-pong"
sysctl -qw kernel.bpf_stats_enabled=1
declare -A bpf_ns
bpf_case "unwind cfi" handle_cpu_sample cpu 1000000000000 --sources cpu --hz 999
bpf_case "unwind fp" handle_cpu_sample cpu 1000000000000 --sources cpu --hz 999 --unwind fp
for stacks in user,kernel kernel none; do
  bpf_case "offcpu stacks $stacks" handle_sched_switch pingpong 1000000000 \
    --sources sched --offcpu-stacks "$stacks"
done
bpf_case "offcpu stacks user,kernel, unwind fp" handle_sched_switch pingpong 1000000000 \
  --sources sched --unwind fp
sysctl -qw kernel.bpf_stats_enabled="$previous_stats"
ratio() { awk -v a="${bpf_ns[$1]:-0}" -v b="${bpf_ns[$2]:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
echo "cfi / fp: cpu sample $(ratio "unwind cfi" "unwind fp")," \
  "sched switch $(ratio "offcpu stacks user,kernel" "offcpu stacks user,kernel, unwind fp")"
