# Sourced by the bench scripts: the kernel's own accounting of BPF programs
# (kernel.bpf_stats_enabled) for the programs one process holds open.

# prog_stats PID NAME: "RUNS NS PROGRAMS" summed over the programs named NAME
# that process PID holds open.
prog_stats() {
  local id
  for id in $(grep -hs '^prog_id:' /proc/"$1"/fdinfo/* | awk '{print $2}' | sort -un); do
    bpftool prog show id "$id" 2> /dev/null || true  # the first line of each names it
  done | awk -v name="$2" '$0 ~ " name " name " " { ++k
    for (i = 1; i <= NF; ++i) { if ($i == "run_time_ns") t += $(i+1); if ($i == "run_cnt") n += $(i+1) } }
    END { printf "%d %d %d\n", n, t, k }'
}
