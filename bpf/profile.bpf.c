// SPDX-License-Identifier: GPL-2.0
/* CPU sampling: runs on every tick of a perf event (cpu-clock by default)
 * on every CPU and records the target thread that was running, with its
 * user stack (bpf/include/unwind.bpf.h) and, unless turned off, kernel
 * stack. */
#include "include/unwind.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Off for a caller other than root: kernel addresses defeat KASLR. */
const volatile bool cfg_kernel_stacks = true;

SEC("perf_event")
int handle_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct loupe_cpu_sample *rec;
	__u64 size;

	if ((__u32)id == 0 || !is_target(id >> 32))
		return 0;
	rec = scratch_space();
	if (!rec)
		return 0;
	rec->tid = (__u32)id;
	rec->tgid = id >> 32;
	capture_stacks(ctx, rec->frames, &rec->user_depth, &rec->kernel_depth, &rec->stack_flags,
		       LOUPE_CNT_STACK_TRUNCATED_CPU, true, cfg_kernel_stacks, 0, 0);
	size = __builtin_offsetof(struct loupe_cpu_sample, frames) +
	       ((__u64)rec->user_depth + rec->kernel_depth) * sizeof(__u64);
	fill_header(&rec->hdr, LOUPE_REC_CPU_SAMPLE, size);
	submit(rec, size, sizeof(*rec), LOUPE_CNT_RING_FULL_CPU);
	return 0;
}
