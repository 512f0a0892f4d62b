// SPDX-License-Identifier: GPL-2.0
/* Scheduler and lifecycle events of the traced processes: context switches
 * (with the stacks of the thread switched out), wakeups, fork, exec, exit
 * and thread names. Each handler exists as tp_btf and as raw_tp; the daemon
 * loads the first set the kernel supports and records which. */
#include "include/common.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile bool cfg_follow_children = false;
/* Stacks of a target thread at switch-out: where it went off-CPU. */
const volatile bool cfg_offcpu_user_stacks = true;
const volatile bool cfg_offcpu_kernel_stacks = true;

struct task_struct___pre_5_14 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state(struct task_struct *task)
{
	if (bpf_core_field_exists(task->__state))
		return BPF_CORE_READ(task, __state);
	return BPF_CORE_READ((struct task_struct___pre_5_14 *)task, state);
}

static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev,
				     struct task_struct *next)
{
	__u32 prev_tgid = BPF_CORE_READ(prev, tgid);
	__u32 next_tgid = BPF_CORE_READ(next, tgid);
	bool prev_is_target = is_target(prev_tgid);
	struct loupe_sched_switch *rec;
	__u64 size;

	if (!prev_is_target && !is_target(next_tgid))
		return 0;
	rec = scratch_space();
	if (!rec)
		return 0;
	rec->prev_tid = BPF_CORE_READ(prev, pid);
	rec->prev_tgid = prev_tgid;
	rec->next_tid = BPF_CORE_READ(next, pid);
	rec->next_tgid = next_tgid;
	/* As the kernel reports it: a preempted task is still runnable. */
	rec->prev_state = preempt ? 0 : task_state(prev);
	rec->user_depth = 0;
	rec->kernel_depth = 0;
	/* The tracepoint runs on prev: its stacks say where it went off-CPU. */
	if (prev_is_target)
		capture_stacks(ctx, rec->frames, &rec->user_depth, &rec->kernel_depth,
			       LOUPE_CNT_STACK_TRUNCATED_SCHED, cfg_offcpu_user_stacks,
			       cfg_offcpu_kernel_stacks);
	size = __builtin_offsetof(struct loupe_sched_switch, frames) +
	       ((__u64)rec->user_depth + rec->kernel_depth) * sizeof(__u64);
	fill_header(&rec->hdr, LOUPE_REC_SCHED_SWITCH, size);
	submit(rec, size, sizeof(*rec), LOUPE_CNT_RING_FULL_SCHED);
	return 0;
}

static __always_inline int on_wakeup(struct task_struct *task, __u32 is_new)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct loupe_sched_wakeup *rec;

	if (!is_target(tgid))
		return 0;
	rec = reserve_record(sizeof(*rec), LOUPE_REC_SCHED_WAKEUP, LOUPE_CNT_RING_FULL_SCHED);
	if (!rec)
		return 0;
	rec->woken_tid = BPF_CORE_READ(task, pid);
	rec->woken_tgid = tgid;
	rec->waker_tid = (__u32)bpf_get_current_pid_tgid();
	rec->target_cpu = BPF_CORE_READ(task, wake_cpu);
	rec->is_new = is_new;
	rec->pad = 0;
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	struct loupe_process_fork *rec;
	__u8 yes = 1;

	if (!is_target(parent_tgid))
		return 0;
	/* Done here, not by the daemon, so no event of the child can slip
	 * past before userspace would have caught up. */
	if (cfg_follow_children && child_tgid != parent_tgid &&
	    bpf_map_update_elem(&target_tgids, &child_tgid, &yes, BPF_NOEXIST) != 0 &&
	    !is_target(child_tgid))
		count(LOUPE_CNT_TARGETS_FULL);
	rec = reserve_record(sizeof(*rec), LOUPE_REC_PROCESS_FORK, LOUPE_CNT_RING_FULL_SCHED);
	if (!rec)
		return 0;
	rec->parent_tid = BPF_CORE_READ(parent, pid);
	rec->parent_tgid = parent_tgid;
	rec->child_tid = BPF_CORE_READ(child, pid);
	rec->child_tgid = child_tgid;
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int on_exec(struct task_struct *task, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct loupe_process_exec *rec;

	if (!is_target(tgid))
		return 0;
	rec = reserve_record(sizeof(*rec), LOUPE_REC_PROCESS_EXEC, LOUPE_CNT_RING_FULL_SCHED);
	if (!rec)
		return 0;
	rec->tid = BPF_CORE_READ(task, pid);
	rec->tgid = tgid;
	bpf_probe_read_kernel_str(rec->filename, sizeof(rec->filename), BPF_CORE_READ(bprm, filename));
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int on_exit(struct task_struct *task)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct loupe_thread_exit *rec;
	__u32 group_dead;

	if (!is_target(tgid))
		return 0;
	group_dead = BPF_CORE_READ(task, signal, live.counter) == 0;
	rec = reserve_record(sizeof(*rec), LOUPE_REC_THREAD_EXIT, LOUPE_CNT_RING_FULL_SCHED);
	if (rec) {
		rec->tid = BPF_CORE_READ(task, pid);
		rec->tgid = tgid;
		rec->exit_code = BPF_CORE_READ(task, exit_code);
		rec->group_dead = group_dead;
		bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	}
	/* A process that is gone is no target: its pid may be reused. */
	if (group_dead)
		bpf_map_delete_elem(&target_tgids, &tgid);
	return 0;
}

static __always_inline int on_rename(struct task_struct *task, const char *comm)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct loupe_thread_name *rec;

	if (!is_target(tgid))
		return 0;
	rec = reserve_record(sizeof(*rec), LOUPE_REC_THREAD_NAME, LOUPE_CNT_RING_FULL_SCHED);
	if (!rec)
		return 0;
	rec->tid = BPF_CORE_READ(task, pid);
	rec->tgid = tgid;
	bpf_probe_read_kernel_str(rec->comm, sizeof(rec->comm), comm);
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

/* Each handler twice: BTF-typed tracepoints where the kernel has them,
 * raw tracepoints otherwise. BPF_PROG reads the arguments the same way. */
#define LOUPE_HANDLERS(kind, suffix)                                                         \
	SEC(kind "/sched_switch")                                                            \
	int BPF_PROG(handle_sched_switch##suffix, bool preempt, struct task_struct *prev,    \
		     struct task_struct *next)                                               \
	{                                                                                    \
		return on_switch(ctx, preempt, prev, next);                                  \
	}                                                                                    \
	/* sched_waking, not sched_wakeup: it fires in the waker's context, where \
	 * sched_wakeup may fire on the target CPU in the idle task (a wakeup the \
	 * kernel queues there by IPI) and name no waker at all. */              \
	SEC(kind "/sched_waking")                                                            \
	int BPF_PROG(handle_sched_wakeup##suffix, struct task_struct *task)                  \
	{                                                                                    \
		return on_wakeup(task, 0);                                                   \
	}                                                                                    \
	SEC(kind "/sched_wakeup_new")                                                        \
	int BPF_PROG(handle_sched_wakeup_new##suffix, struct task_struct *task)              \
	{                                                                                    \
		return on_wakeup(task, 1);                                                   \
	}                                                                                    \
	SEC(kind "/sched_process_fork")                                                      \
	int BPF_PROG(handle_process_fork##suffix, struct task_struct *parent,                \
		     struct task_struct *child)                                              \
	{                                                                                    \
		return on_fork(parent, child);                                               \
	}                                                                                    \
	SEC(kind "/sched_process_exec")                                                      \
	int BPF_PROG(handle_process_exec##suffix, struct task_struct *task, pid_t old_pid,   \
		     struct linux_binprm *bprm)                                              \
	{                                                                                    \
		return on_exec(task, bprm);                                                  \
	}                                                                                    \
	SEC(kind "/sched_process_exit")                                                      \
	int BPF_PROG(handle_process_exit##suffix, struct task_struct *task)                  \
	{                                                                                    \
		return on_exit(task);                                                        \
	}                                                                                    \
	SEC(kind "/task_rename")                                                             \
	int BPF_PROG(handle_task_rename##suffix, struct task_struct *task, const char *comm) \
	{                                                                                    \
		return on_rename(task, comm);                                                \
	}

LOUPE_HANDLERS("tp_btf", )
LOUPE_HANDLERS("raw_tp", _raw)
