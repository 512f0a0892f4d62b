// SPDX-License-Identifier: GPL-2.0
/* The floor for probe benchmarks (tests/bench/probe_bench.cc): a uprobe
 * whose program does nothing but write one timestamped ring record. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} floor_ring SEC(".maps");

struct floor_record {
	__u64 time_ns;
	__u64 pid_tgid;
};

SEC("uprobe")
int handle_floor(void *ctx)
{
	struct floor_record *rec = bpf_ringbuf_reserve(&floor_ring, sizeof(*rec), 0);

	if (!rec)
		return 0;
	rec->time_ns = bpf_ktime_get_ns();
	rec->pid_tgid = bpf_get_current_pid_tgid();
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}
