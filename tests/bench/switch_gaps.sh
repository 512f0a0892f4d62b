#!/usr/bin/env bash
# Whether the kernel's own sched_switch stream has gaps for a process
# (root): bpftrace, independent of Loupe, follows every thread of PID
# through the tracepoint for SECONDS and counts a thread switched out twice
# with no switch-in between (its switch-in was never traced) and in twice
# (a switch-out never traced). Compare with what a Loupe trace of the same
# process shows: a gap the kernel has is not Loupe's loss.
#   tests/bench/switch_gaps.sh PID [SECONDS]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 PID [SECONDS]" >&2; exit 2; }
pid=$1 seconds=${2:-4}
command -v bpftrace > /dev/null || { echo "bpftrace is needed" >&2; exit 1; }
bpftrace -e "
tracepoint:sched:sched_switch {
  if (curtask->tgid == $pid) {
    @seen[args->prev_pid] = 1;
    if (@state[args->prev_pid] == 2) { @out_twice = count(); }
    @state[args->prev_pid] = 2; @outs = count();
  }
  if (@seen[args->next_pid]) {
    if (@state[args->next_pid] == 1) { @in_twice = count(); }
    @state[args->next_pid] = 1; @ins = count();
  }
}
interval:s:$seconds { exit(); }
END { clear(@seen); clear(@state); }" 2>&1 | grep -E '^@(outs|ins|out_twice|in_twice)'
