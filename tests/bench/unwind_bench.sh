#!/usr/bin/env bash
# User stack unwinding (issue 16), Loupe's CFI walk next to its frame-pointer
# walk and to perf's DWARF unwinding, measured in one run (root):
#   tests/bench/unwind_bench.sh [build-dir]   # SECONDS_PER_RUN (3), CPU_ITERATIONS (1.5e9)
# About 2.5 minutes.
# Prints figures only; nothing here asserts a time.
#
# 1. Coverage. Workloads built without frame pointers calling into Debian's
#    libc: unwind_app_nofp cpu (qsort, memcpy, malloc), python3.11 running
#    a loop, xz -9, gzip -9 and sort (two threads) of generated text. Each is
#    sampled at 999 Hz by tracectl --unwind=cfi, tracectl --unwind=fp and
#    perf record --call-graph dwarf, a fresh process each time. A sample
#    "reaches the bottom" when a frame of its user stack is main, _start,
#    __libc_start_main*, __libc_start_call_main or start_thread (stacks
#    from `tracectl export --format folded`, `perf script`).
# 2. Cost. kernel.bpf_stats_enabled: run_time_ns / run_cnt of the programs
#    this run's tracectl holds (found through /proc/PID/fdinfo, so sessions
#    of other processes never count), per run and per target sample (the
#    sampler runs on every CPU and returns at once for other tasks), cfi vs
#    fp; then what perf's DWARF approach costs per sample.
# 3. The target's CPU time for fixed work (bench_work cpu) under each.
set -euo pipefail
build=${1:-build}
tracectl=$build/tools/tracectl/tracectl
testprogs=$build/tests/testprogs
seconds=${SECONDS_PER_RUN:-3}
hz=999
tmp=$(mktemp -d)
# Every tracectl here traces in its own process (embedded mode), never
# through a louped that happens to listen on the default socket.
export LOUPE_SOCKET=$tmp/no-louped.sock
previous_stats=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
  sysctl -qw kernel.bpf_stats_enabled="$previous_stats"
  kill $(jobs -p) 2> /dev/null  # this script's own workloads and tracers
  rm -rf "$tmp"
}
trap cleanup EXIT
command -v perf > /dev/null || { echo "perf is needed (linux-perf)"; exit 1; }
command -v bpftool > /dev/null || { echo "bpftool is needed"; exit 1; }
for program in "$tracectl" "$testprogs/unwind_app_nofp" "$testprogs/bench_work" /usr/bin/python3.11 \
  /usr/bin/xz /usr/bin/gzip /usr/bin/sort; do
  [ -x "$program" ] || { echo "missing $program"; exit 1; }
done
bottom='^(main|_start|__libc_start_main.*|__libc_start_call_main|start_thread)$'

# 2 M lines of generated text (~60 MB): compresses like text, sorts by locale.
input=$tmp/input.txt
awk 'BEGIN { srand(16); split("alpha beta gamma delta epsilon zeta eta theta iota kappa", w, " ")
  for (i = 0; i < 2000000; i++)
    printf "%s %d %s-%x %d\n", w[int(rand() * 10) + 1], int(rand() * 1e6), w[i % 10 + 1],
      int(rand() * 65536), i % 977 }' > "$input"
python_loop='
import json, re, zlib
data = {"key%d" % i: [i, str(i) * 3, {"x": i / 7, "y": [i] * 5}] for i in range(3000)}
while True:
    text = json.dumps(data, sort_keys=True)
    json.loads(text)
    zlib.compress(text.encode(), 6)
    re.findall(r"key(\d+)", text)
    sorted(data, key=lambda k: k[::-1])'

# start_workload NAME: starts it in the background; sets pid.
start_workload() {
  case $1 in
    unwind_app_nofp)
      "$testprogs/unwind_app_nofp" cpu > "$tmp/ready" & pid=$!
      for _ in $(seq 50); do grep -q ready "$tmp/ready" && break; sleep 0.1; done ;;
    bench_work) "$testprogs/bench_work" cpu 1000000000000 0 > /dev/null & pid=$! ;;
    python3.11) /usr/bin/python3.11 -c "$python_loop" & pid=$! ;;
    xz) { while cat "$input"; do :; done; } 2> /dev/null | xz -9 -T1 > /dev/null & pid=$! ;;
    gzip) { while cat "$input"; do :; done; } 2> /dev/null | gzip -9 > /dev/null & pid=$! ;;
    sort) sort -S 1G --parallel=2 "$input" "$input" "$input" -o /dev/null & pid=$! ;;
  esac
  sleep 0.5
}
stop_workload() { kill "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; pid=; }

# reach_folded DIR: "samples reached" from the folded export
# (process;root;...;leaf COUNT).
reach_folded() {
  "$tracectl" export --format folded -o - "$1" 2> /dev/null | awk -v bottom="$bottom" '{
    count = $NF; stack = substr($0, 1, length($0) - length($NF) - 1)
    n = split(stack, f, ";"); hit = 0
    for (i = 2; i <= n; ++i) if (f[i] !~ /_\[k\]$/ && f[i] ~ bottom) hit = 1
    samples += count; reached += hit * count }
    END { printf "%d %d\n", samples, reached }'
}

# sample_frames DIR: "samples user_frames" from the JSON export: the frames
# the walk returned (the folded export adds inlined functions).
sample_frames() {
  "$tracectl" export --format json -o - "$1" 2> /dev/null | awk '
    /"kind":"cpu_sample"/ { ++n; if (match($0, /"user_stack":\[[^]]*\]/)) {
      s = substr($0, RSTART + 14, RLENGTH - 15); if (s != "") f += gsub(/,/, ",", s) + 1 } }
    END { printf "%d %d\n", n, f }'
}

# reach_perf FILE: the same from `perf script -F tid,ip,sym` (one header line,
# then one line per frame, a blank line after each sample).
reach_perf() {
  awk -v bottom="$bottom" '
    /^[^\t ]|^ *[0-9]+ *$/ { if (open) finish(); open = 1; hit = 0; next }
    /^\t/ { ip = $1; sym = $2; sub(/@.*/, "", sym); sub(/\.(part|constprop|isra|cold)\..*/, "", sym)
            if (ip !~ /^ffffffff/) ++frames; if (sym ~ bottom) hit = 1; next }
    /^$/ { if (open) finish(); open = 0 }
    function finish() { ++samples; reached += hit }
    END { if (open) finish(); printf "%d %d %d\n", samples, reached, frames }' "$1"
}

# first_unreached DIR: the most frequent CFI stack that does not reach the bottom.
first_unreached() {
  "$tracectl" export --format folded -o - "$1" 2> /dev/null | awk -v bottom="$bottom" '{
    stack = substr($0, 1, length($0) - length($NF) - 1); n = split(stack, f, ";"); hit = 0
    for (i = 2; i <= n; ++i) if (f[i] !~ /_\[k\]$/ && f[i] ~ bottom) hit = 1
    if (!hit) print $NF, stack }' | sort -rn | head -1 | cut -c1-300
}

percent() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f %%", 100 * a / b; else printf "-" }'; }
per() { awk -v a="$1" -v b="$2" -v s="${3:-1}" 'BEGIN { if (b > 0) printf "%.1f", a * s / b; else printf "-" }'; }
median() { tr ' ' '\n' <<< "$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cpu_of() { tail -n 1 "$1" | awk '{printf "%.3f", $1 + $2}'; }  # GNU time's last line: %U %S ...

echo "== 1. Samples whose user stack reaches main/_start/__libc_start_main/start_thread"
echo "   ${seconds} s at $hz Hz per cell; frames = user frames per sample; tracer cpu = GNU time u+s"
printf '%-16s | %-30s | %-30s | %-30s\n' workload "loupe --unwind=cfi" "loupe --unwind=fp" \
  "perf --call-graph dwarf"
printf '%-16s | %-30s | %-30s | %-30s\n' "" "samples reach frames cpu-ms" \
  "samples reach frames cpu-ms" "samples reach frames cpu-ms"
unreached=()
perf_records=()
for workload in unwind_app_nofp python3.11 xz gzip sort; do
  row=$(printf '%-16s' "$workload")
  for mode in cfi fp; do
    start_workload "$workload"
    rm -rf "$tmp/t"
    /usr/bin/time -f "%U %S %M" -o "$tmp/time" "$tracectl" attach -q --sources cpu --hz "$hz" \
      --unwind "$mode" -d "${seconds}s" -o "$tmp/t" "$pid" > /dev/null 2>&1 || true
    stop_workload
    read -r samples reached < <(reach_folded "$tmp/t")
    read -r _ frames < <(sample_frames "$tmp/t")
    row+=$(printf ' | %7d %8s %5s %7.0f' "$samples" "$(percent "$reached" "$samples")" \
      "$(per "$frames" "$samples")" "$(echo "$(cpu_of "$tmp/time") * 1000" | bc -l)")
    if [ "$mode" = cfi ]; then
      [ "$reached" -lt "$samples" ] &&
        unreached+=("$workload ($((samples - reached)) of $samples): $(first_unreached "$tmp/t")")
      loupe_us=$(per "$(cpu_of "$tmp/time")" "$samples" 1000000)
      loupe_bytes=$(per "$(du -sb "$tmp/t" | awk '{print $1}')" "$samples")
    fi
  done
  start_workload "$workload"
  /usr/bin/time -f "%U %S %M" -o "$tmp/time" timeout -s INT "$seconds" perf record -q -e cpu-clock \
    -F "$hz" --call-graph dwarf -p "$pid" -o "$tmp/perf.data" > /dev/null 2>&1 || true
  stop_workload
  record_cpu=$(cpu_of "$tmp/time")
  /usr/bin/time -f "%U %S %M" -o "$tmp/time" perf script -i "$tmp/perf.data" --no-inline \
    -F tid,ip,sym > "$tmp/perf.txt" 2> /dev/null || true
  script_cpu=$(cpu_of "$tmp/time")
  read -r samples reached frames < <(reach_perf "$tmp/perf.txt")
  row+=$(printf ' | %7d %8s %5s %7.0f' "$samples" "$(percent "$reached" "$samples")" \
    "$(per "$frames" "$samples")" "$(echo "$record_cpu * 1000" | bc -l)")
  echo "$row"
  perf_records+=("$(printf '%-16s %7d %10.0f %10.1f %10.1f | %10.0f %10.1f' "$workload" "$samples" \
    "$(per "$(stat -c %s "$tmp/perf.data")" "$samples")" \
    "$(per "$record_cpu" "$samples" 1000000)" "$(per "$script_cpu" "$samples" 1000000)" \
    "$loupe_bytes" "$loupe_us")")
done
echo
echo "Most frequent CFI stack not reaching the bottom, per workload:"
for line in "${unreached[@]}"; do echo "  $line"; done
[ ${#unreached[@]} -eq 0 ] && echo "  (none)"
echo

# shellcheck source=prog_stats.sh
source "$(dirname "$0")/prog_stats.sh"

# wait_for_program PID NAME: until process PID holds a program named NAME (10 s at most).
wait_for_program() {
  for _ in $(seq 100); do
    [ "$(prog_stats "$1" "$2" | awk '{print $3}')" -gt 0 ] && return 0
    sleep 0.1
  done
  echo "warning: no $2 program in process $1 after 10 s"
}

echo "== 2. BPF cost per sample (kernel.bpf_stats_enabled), sched+cpu sources, $hz Hz, ${seconds} s,"
echo "   cfi and fp alternating, 3 runs each; ns/sample = handle_cpu_sample's run_time_ns / the"
echo "   target's samples in the trace; switch = handle_sched_switch per run"
sysctl -qw kernel.bpf_stats_enabled=1
printf '%-16s %-4s %8s %8s %9s %10s %12s %10s\n' workload mode runs samples "ns/run" "ns/sample" \
  "user frames" "switch ns"
declare -A per_sample
for workload in unwind_app_nofp bench_work; do
  for _ in 1 2 3; do
    for mode in cfi fp; do
      start_workload "$workload"
      rm -rf "$tmp/t"
      "$tracectl" attach -q --sources sched,cpu --hz "$hz" --unwind "$mode" -o "$tmp/t" "$pid" \
        > /dev/null 2>&1 &
      tracer=$!
      wait_for_program "$tracer" handle_cpu_sample
      sleep "$seconds"
      read -r runs ns programs < <(prog_stats "$tracer" handle_cpu_sample)
      read -r switch_runs switch_ns _ < <(prog_stats "$tracer" handle_sched_switch)
      kill -INT "$tracer"; wait "$tracer" || true
      stop_workload
      [ "$programs" = 1 ] || echo "warning: $programs handle_cpu_sample programs in tracectl $tracer"
      read -r samples frames < <(sample_frames "$tmp/t")
      per_sample[$workload.$mode]+="$(per "$ns" "$samples") "
      printf '%-16s %-4s %8d %8d %9s %10s %12s %10s\n' "$workload" "$mode" "$runs" "$samples" \
        "$(per "$ns" "$runs")" "$(per "$ns" "$samples")" "$(per "$frames" "$samples")" \
        "$(per "$switch_ns" "$switch_runs")"
    done
  done
  cfi=$(median "${per_sample[$workload.cfi]}")
  fp=$(median "${per_sample[$workload.fp]}")
  echo "$workload: median ns/sample cfi $cfi, fp $fp; cfi / fp = $(awk -v a="$cfi" -v b="$fp" \
    'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
done
sysctl -qw kernel.bpf_stats_enabled="$previous_stats"
echo
echo "Per sample, from the runs of part 1: perf --call-graph dwarf's perf.data bytes, perf record's"
echo "CPU (GNU time u+s) and perf script's CPU to unwind and symbolize (us); tracectl --unwind=cfi's"
echo "trace bytes on disk and its whole CPU (start, tables, symbols, segments; us)"
printf '%-16s %7s %10s %10s %10s | %10s %10s\n' workload samples "perf B" "record us" "script us" \
  "loupe B" "tracectl us"
for line in "${perf_records[@]}"; do echo "$line"; done
echo

echo "== 3. Target CPU time for fixed work: bench_work cpu (frame pointers), median of 3, ms"
iterations=${CPU_ITERATIONS:-1500000000}
declare -A cpu_ms
cases=(untraced loupe_cfi loupe_fp perf_fp perf_dwarf)
for _ in 1 2 3; do
  for name in "${cases[@]}"; do
    "$testprogs/bench_work" cpu "$iterations" 1 > "$tmp/elapsed" &
    target=$!
    case $name in
      loupe_cfi | loupe_fp)
        "$tracectl" attach -q --sources cpu --hz "$hz" --unwind "${name#loupe_}" -o "$tmp/t" "$target" \
          > /dev/null 2>&1 & ;;
      perf_fp) perf record -q -e cpu-clock -F "$hz" -g -p "$target" -o "$tmp/perf.data" \
          > /dev/null 2>&1 & ;;
      perf_dwarf) perf record -q -e cpu-clock -F "$hz" --call-graph dwarf -p "$target" \
          -o "$tmp/perf.data" > /dev/null 2>&1 & ;;
      untraced) true & ;;
    esac
    tracer=$!
    wait "$target"; wait "$tracer" || true
    cpu_ms[$name]+="$(awk '{printf "%.1f", $2 / 1e6}' "$tmp/elapsed") "
    rm -rf "$tmp/t" "$tmp/perf.data"
  done
done
base=$(median "${cpu_ms[untraced]}")
for name in "${cases[@]}"; do
  m=$(median "${cpu_ms[$name]}")
  printf '%-12s %9.1f ms %+7.1f %%   (runs: %s)\n' "$name" "$m" \
    "$(echo "($m - $base) * 100 / $base" | bc -l)" "${cpu_ms[$name]% }"
done
