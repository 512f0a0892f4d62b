// SPDX-License-Identifier: GPL-2.0
/* Scheduler events of the traced processes: context switches. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "shared/records.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* tgids being traced; userspace fills it on attach. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} target_tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOUPE_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 counter)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &counter);

	if (value)
		*value += 1;
}

static __always_inline bool is_target(__u32 tgid)
{
	return bpf_map_lookup_elem(&target_tgids, &tgid) != NULL;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	__u32 prev_tgid = BPF_CORE_READ(prev, tgid);
	__u32 next_tgid = BPF_CORE_READ(next, tgid);
	struct loupe_sched_switch *rec;

	if (!is_target(prev_tgid) && !is_target(next_tgid))
		return 0;

	rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);
	if (!rec) {
		count(LOUPE_CNT_RING_FULL_SCHED);
		return 0;
	}
	rec->hdr.type = LOUPE_REC_SCHED_SWITCH;
	rec->hdr.size = sizeof(*rec);
	rec->hdr.cpu = bpf_get_smp_processor_id();
	rec->hdr.time_ns = bpf_ktime_get_ns();
	rec->prev_tid = BPF_CORE_READ(prev, pid);
	rec->prev_tgid = prev_tgid;
	rec->next_tid = BPF_CORE_READ(next, pid);
	rec->next_tgid = next_tgid;
	rec->prev_state = BPF_CORE_READ(prev, __state);
	rec->pad = 0;
	/* Batched draining: the daemon polls, so no wakeup per event. */
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}
