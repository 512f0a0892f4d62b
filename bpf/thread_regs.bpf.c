// SPDX-License-Identifier: GPL-2.0
/* The user registers of one thread asleep, from a task iterator the daemon
 * gives its tid: where a walk of its user stack begins, as a sample's does
 * from the registers the kernel saved on entry (unwind.bpf.h). For threads
 * that slept through a whole trace, which no switch-out describes
 * (daemon/bpf/thread_regs.cc). A thread on a CPU writes nothing: its
 * saved registers are not where it is. */
/* Not common.bpf.h: this object needs none of the session's maps. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "shared/records.h"

char LICENSE[] SEC("license") = "GPL";

_Static_assert(sizeof(((struct loupe_thread_state *)0)->regs) == sizeof(struct pt_regs),
	       "loupe_thread_state.regs holds struct pt_regs");

SEC("iter/task")
int read_thread_state(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct loupe_thread_state out = {};
	struct return_instance *pending;
	struct uprobe_task *utask;

	/* Kernel threads have no user registers. */
	if (!task || !task->mm || task->__state == 0)
		return 0;
	out.tid = task->pid;
	if (bpf_probe_read_kernel(out.regs, sizeof(out.regs), (void *)bpf_task_pt_regs(task)) != 0)
		return 0;
	/* Its context switches, to tell whether it ran between two reads. */
	out.switches = task->nvcsw + task->nivcsw;
	/* A kernel built without uprobes has no uprobe state. */
	utask = bpf_core_field_exists(task->utask) ? BPF_CORE_READ(task, utask) : NULL;
	pending = utask ? BPF_CORE_READ(utask, return_instances) : NULL;
	if (pending)
		out.trampoline = BPF_CORE_READ(task, mm, uprobes_state.xol_area, vaddr);
	for (int i = 0; i < LOUPE_THREAD_PENDING_MAX && pending; i++) {
		out.pending[i].slot = BPF_CORE_READ(pending, stack);
		out.pending[i].return_address = BPF_CORE_READ(pending, orig_ret_vaddr);
		out.pending_count = i + 1;
		pending = BPF_CORE_READ(pending, next);
	}
	bpf_seq_write(ctx->meta->seq, &out, sizeof(out));
	return 0;
}
