// SPDX-License-Identifier: GPL-2.0
/* Scheduler and lifecycle events of the traced processes: context switches
 * (with the stacks of the thread switched out), wakeups, fork, exec, exit
 * and thread names. Each handler exists as tp_btf and as raw_tp; the daemon
 * loads the first set the kernel supports and records which. */
#include "include/unwind.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile bool cfg_follow_children = false;
/* A caller that is not root traces only processes running with its own
 * rights: one that execs a setuid or setgid program, or one with file
 * capabilities, stops being a target at once, before its new image runs. */
const volatile bool cfg_plain_user_only = false;
const volatile __u32 cfg_caller_uid = 0;
/* Stacks of a target thread at switch-out: where it went off-CPU. */
const volatile bool cfg_offcpu_user_stacks = true;
const volatile bool cfg_offcpu_kernel_stacks = true;
/* Where __schedule lies in kernel text (from kallsyms; 0 if unknown): a
 * switch-out's kernel stack starts there. The frames before it are the
 * tracer's (this program, bpf_trace_runN, __traceiter_sched_switch, as many
 * as the kernel has) and are left out at capture; shown, they split one
 * wait's stacks into several rows. Writable data rather than read-only
 * configuration: louped sets it between load and attach, so that the load
 * does not wait for kallsyms (read in 50-75 ms beside it). */
volatile __u64 cfg_schedule_start = 0;
volatile __u64 cfg_schedule_end = 0;
/* Set by louped once every program is attached, cleared when tracing stops
 * before they are detached: attached or detached one by one, they would
 * start and stop at different moments (wakeups recorded after the last
 * switch read as a thread woken while it ran), and the trace could not say
 * from when on every switch is in it. */
volatile bool recording = true;

struct task_struct___pre_5_14 {
	long state;
} __attribute__((preserve_access_index));

/* Kernels without CONFIG_THREAD_INFO_IN_TASK keep the cpu in the task. */
struct task_struct___cpu {
	unsigned int cpu;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state(struct task_struct *task)
{
	if (bpf_core_field_exists(task->__state))
		return BPF_CORE_READ(task, __state);
	return BPF_CORE_READ((struct task_struct___pre_5_14 *)task, state);
}

/* Target threads waiting in each CPU's run queue (woken or preempted, not
 * yet switched in). While one waits, every switch on that CPU is recorded:
 * they say who held the CPU meanwhile. Other CPUs update a CPU's count (a
 * remote wakeup, a migration), hence the atomics. Sized by the daemon to
 * the possible CPUs before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __s32);
} runnable_targets SEC(".maps");

/* Per CPU: the contexts (1 << enum loupe_waker_context) in which a timer
 * callback is running, so a wakeup from inside one is named a timer's. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} timer_contexts SEC(".maps");

/* The preempt count is the per-CPU __preempt_count (up to 6.1, and from
 * 6.15; 6.2 to 6.14 keep it in pcpu_hot, which is not read: declaring a
 * second weak ksym makes libbpf search module BTF, which fails without
 * CAP_SYS_ADMIN). The kernel finds it only through kallsyms, which lists
 * data symbols only with CONFIG_KALLSYMS_ALL: the programs that read it come
 * in a second flavour (_pcnt) that the daemon loads only where it can. */
extern const int __preempt_count __ksym __weak;

#define LOUPE_NMI_MASK 0x00f00000
#define LOUPE_HARDIRQ_MASK 0x000f0000
#define LOUPE_SOFTIRQ_OFFSET 0x100 /* set while softirqs are served, not merely disabled */
#define LOUPE_TASK_WAKING 0x200

/* Per CPU, where the preempt count cannot be read: how deep the CPU is in
 * hard interrupts (device handlers, functions called by another CPU) and in
 * softirqs, from their entry and exit tracepoints. Without it an interrupt
 * that wakes a target (a disk's completion) names whatever task it
 * interrupted as the waker. */
struct loupe_irq_depth {
	__s32 hardirq, softirq;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loupe_irq_depth);
} irq_depth SEC(".maps");

static __always_inline int on_irq_edge(bool hard, bool entry)
{
	__u32 zero = 0;
	struct loupe_irq_depth *depth = bpf_map_lookup_elem(&irq_depth, &zero);
	__s32 *count;

	if (!depth)
		return 0;
	count = hard ? &depth->hardirq : &depth->softirq;
	/* Attached midway through one, a CPU sees an exit without its entry. */
	if (entry)
		*count += 1;
	else if (*count > 0)
		*count -= 1;
	return 0;
}

/* A CPU switches tasks only outside interrupts: its depth is 0 here. An
 * edge the counts missed (an entry seen while its exit's program was still
 * being attached, a run the kernel skipped as recursive) would otherwise
 * make every later wakeup on the CPU an interrupt's. */
static __always_inline void forget_irq_depth(void)
{
	__u32 zero = 0;
	struct loupe_irq_depth *depth = bpf_map_lookup_elem(&irq_depth, &zero);

	if (depth && (depth->hardirq | depth->softirq))
		*depth = (struct loupe_irq_depth){};
}

static __always_inline __u32 irq_context(bool preempt_count)
{
	int count = 0;

	if (!preempt_count) {
		__u32 zero = 0;
		struct loupe_irq_depth *depth = bpf_map_lookup_elem(&irq_depth, &zero);

		if (depth && depth->hardirq > 0)
			return LOUPE_WAKER_HARDIRQ;
		if (depth && depth->softirq > 0)
			return LOUPE_WAKER_SOFTIRQ;
		return LOUPE_WAKER_TASK;
	}
	if (&__preempt_count)
		count = *(const int *)bpf_this_cpu_ptr(&__preempt_count);
	if (count & LOUPE_NMI_MASK)
		return LOUPE_WAKER_NMI;
	if (count & LOUPE_HARDIRQ_MASK)
		return LOUPE_WAKER_HARDIRQ;
	if (count & LOUPE_SOFTIRQ_OFFSET)
		return LOUPE_WAKER_SOFTIRQ;
	return LOUPE_WAKER_TASK;
}

/* Per CPU, the task that raised the pending network receive softirq from
 * its own context, 0 none: a write to the loopback device queues the
 * packet and raises it, and the kernel serves it on that task's stack when
 * the write re-enables softirqs. A wakeup made there is the writer's (the
 * local database that answered), not a network interrupt's. Cleared when
 * the softirq is served and at a switch, so that a later interrupt's
 * softirq on top of the same task is not taken for its own. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} net_rx_raiser SEC(".maps");

#define LOUPE_NET_RX_SOFTIRQ 3

static __always_inline int on_softirq_raise(unsigned int vec, bool preempt_count)
{
	__u32 zero = 0;
	__u64 *raiser;

	if (vec != LOUPE_NET_RX_SOFTIRQ)
		return 0;
	raiser = bpf_map_lookup_elem(&net_rx_raiser, &zero);
	if (raiser)
		*raiser = irq_context(preempt_count) == LOUPE_WAKER_TASK ? bpf_get_current_pid_tgid() : 0;
	return 0;
}

static __always_inline void forget_net_rx_raiser(void)
{
	__u32 zero = 0;
	__u64 *raiser = bpf_map_lookup_elem(&net_rx_raiser, &zero);

	if (raiser && *raiser)
		*raiser = 0;
}

static __always_inline bool net_rx_raised_by_current(void)
{
	__u32 zero = 0;
	__u64 *raiser = bpf_map_lookup_elem(&net_rx_raiser, &zero);

	return raiser && *raiser && *raiser == bpf_get_current_pid_tgid();
}

static __always_inline int on_timer(bool entry, bool preempt_count)
{
	__u32 zero = 0;
	__u32 *contexts = bpf_map_lookup_elem(&timer_contexts, &zero);
	__u32 bit = 1u << irq_context(preempt_count);

	if (contexts)
		*contexts = entry ? *contexts | bit : *contexts & ~bit;
	return 0;
}

static __always_inline __u32 task_cpu(struct task_struct *task)
{
	if (bpf_core_field_exists(task->thread_info.cpu))
		return BPF_CORE_READ(task, thread_info.cpu);
	return BPF_CORE_READ((struct task_struct___cpu *)task, cpu);
}

static __always_inline void add_runnable(__u32 cpu, __s32 delta)
{
	__s32 *waiting = bpf_map_lookup_elem(&runnable_targets, &cpu);

	if (!waiting)
		return;
	/* Attached mid-flight, a thread may leave a queue it was never counted
	 * in: never below zero. */
	if (delta < 0 && *waiting <= 0)
		return;
	__sync_fetch_and_add(waiting, delta);
}

/* The name of a side that is not a target, for the daemon to describe. */
static __always_inline void fill_comm(char *comm, struct task_struct *task, bool is_target,
				      __u32 tid)
{
	if (is_target || tid == 0)
		__builtin_memset(comm, 0, LOUPE_COMM_LEN);
	else
		bpf_core_read(comm, LOUPE_COMM_LEN, &task->comm);
}

/* How long `prev` has run since its last arrival on a CPU, from the run
 * queue's clock (brought up to date by __schedule before sched_switch;
 * elsewhere it may lag by up to a tick)
 * and the arrival the scheduler's own accounting keeps (CONFIG_SCHED_INFO).
 * Some switches are never reported by the tracepoint (seen on a 6.18 guest:
 * none from its init's threads, ~5 per second), so a target's switch-in can
 * be missing; its switch-out says when it was. 0 where unknown. */
static __always_inline __u32 ran_since_arrival(struct task_struct *prev)
{
	__u64 now, arrived;

	if (!bpf_core_field_exists(prev->sched_info.last_arrival) ||
	    !bpf_core_field_exists(prev->se.cfs_rq) ||
	    !bpf_core_field_exists(((struct cfs_rq *)0)->rq))
		return 0;
	now = BPF_CORE_READ(prev, se.cfs_rq, rq, clock);
	arrived = BPF_CORE_READ(prev, sched_info.last_arrival);
	if (arrived == 0 || now <= arrived || now - arrived > 0xffffffffULL)
		return 0;
	return (__u32)(now - arrived);
}

/* The fair class's policies (uapi/linux/sched.h): only their tasks have a
 * CPU quota to wait for. */
#define LOUPE_SCHED_NORMAL 0
#define LOUPE_SCHED_BATCH 3
#define LOUPE_SCHED_IDLE 5

/* Whether a preempted `task` may not run again until its cgroup's CPU quota
 * (CFS bandwidth) refills, however idle its CPU: from 6.18 the kernel
 * throttles each task of a group over quota on its way back to user space
 * (task->throttled); before, the group's run queue stays throttled with its
 * tasks on it (a nonzero throttle_count up the hierarchy). */
static __always_inline bool quota_throttled(struct task_struct *task)
{
	__u32 policy;

	if (bpf_core_field_exists(task->throttled))
		return BPF_CORE_READ(task, throttled);
	if (!bpf_core_field_exists(task->se.cfs_rq) ||
	    !bpf_core_field_exists(((struct cfs_rq *)0)->throttle_count))
		return false;
	/* Every task has a cfs_rq, but only a fair-class one waits for its quota. */
	policy = BPF_CORE_READ(task, policy);
	if (policy != LOUPE_SCHED_NORMAL && policy != LOUPE_SCHED_BATCH && policy != LOUPE_SCHED_IDLE)
		return false;
	return BPF_CORE_READ(task, se.cfs_rq, throttle_count) > 0;
}

/* Per target thread, as its switches last told: how many times it switched
 * out asleep, and whether it has been off its CPU asleep since the last
 * (no switch-in since). Written on the thread's own CPU by its switches,
 * read by wakers elsewhere. A thread beyond the map's size has none, and
 * its wakeups are judged as if it had never slept. */
struct thread_sleeps {
	__u32 count;
	__u32 asleep;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct thread_sleeps);
} thread_sleeps SEC(".maps");

static __always_inline void note_switch_out(__u32 tid, __u32 prev_state)
{
	struct thread_sleeps *sleeps, none = {};

	if (prev_state & LOUPE_TASK_DEAD) {
		bpf_map_delete_elem(&thread_sleeps, &tid);
		return;
	}
	sleeps = bpf_map_lookup_elem(&thread_sleeps, &tid);
	if (prev_state == 0) {
		/* Preempted: it ran, also where its switch-in was not reported. */
		if (sleeps)
			*(volatile __u32 *)&sleeps->asleep = 0;
		return;
	}
	if (!sleeps) {
		bpf_map_update_elem(&thread_sleeps, &tid, &none, BPF_NOEXIST);
		sleeps = bpf_map_lookup_elem(&thread_sleeps, &tid);
		if (!sleeps)
			return;
	}
	/* Counted before it is marked asleep: a waker that sees it asleep
	 * also sees the count that sleep made. */
	*(volatile __u32 *)&sleeps->count = sleeps->count + 1;
	barrier();
	*(volatile __u32 *)&sleeps->asleep = 1;
}

static __always_inline void note_switch_in(__u32 tid)
{
	struct thread_sleeps *sleeps = bpf_map_lookup_elem(&thread_sleeps, &tid);

	if (sleeps)
		*(volatile __u32 *)&sleeps->asleep = 0;
}

/* A wakeup of a target still on its run queue, though set to sleep, and
 * not off its CPU asleep: it is on its CPU going to sleep, or was preempted
 * before it could. Either the kernel only sets it running again (no sleep:
 * nothing to record; also where a pending signal turns its switch-out into
 * a preemption), or it dequeues itself before the waker looks again, and
 * the kernel wakes it for real once it is off its CPU. Which one, only
 * sched_wakeup can tell: the wakeup is kept with the thread's count of
 * sleeps, and written there if that count grew meanwhile. */
struct racing_wakeup {
	struct loupe_sched_wakeup rec;
	__u32 sleeps;
	/* The thread had no thread_sleeps entry (none left to make): its
	 * voluntary switches tell instead, which a switch-out with a signal
	 * pending also counts. */
	__u32 uncounted;
	__u64 voluntary_switches;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct racing_wakeup);
} racing_wakeups SEC(".maps");

static __always_inline __u32 sleeps_of(__u32 tid)
{
	struct thread_sleeps *sleeps = bpf_map_lookup_elem(&thread_sleeps, &tid);

	return sleeps ? *(volatile __u32 *)&sleeps->count : 0;
}

/* Per target process, its threads that have exited (their exit record
 * written) and not yet switched out for good: the process stays a target
 * until none is left and none lives, so every thread's last switch is
 * recorded, though the kernel may run them in any order. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LOUPE_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __s32);
} exiting_threads SEC(".maps");

/* A thread of a target leaves its CPU for good. When it is the last of its
 * process to (none lives, none exited is still to switch out), the process
 * is gone: no target any more, as its pid may be reused. This switch is
 * still recorded. */
static __always_inline void last_switch_of(struct task_struct *prev, __u32 tgid)
{
	__s32 *exiting = bpf_map_lookup_elem(&exiting_threads, &tgid);

	/* Read after the decrement: of two last switches at once on two CPUs,
	 * the later reader sees none left. */
	if (exiting)
		__sync_fetch_and_add(exiting, -1);
	if ((exiting && *exiting > 0) || BPF_CORE_READ(prev, signal, live.counter) != 0)
		return;
	bpf_map_delete_elem(&exiting_threads, &tgid);
	bpf_map_delete_elem(&target_tgids, &tgid);
}

static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev,
				     struct task_struct *next)
{
	__u32 prev_tgid = BPF_CORE_READ(prev, tgid);
	__u32 next_tgid = BPF_CORE_READ(next, tgid);
	__u32 next_tid = BPF_CORE_READ(next, pid);
	bool prev_is_target = is_target(prev_tgid);
	bool next_is_target = is_target(next_tgid);
	__u32 cpu = bpf_get_smp_processor_id();
	__s32 *waiting = bpf_map_lookup_elem(&runnable_targets, &cpu);
	struct loupe_sched_switch *rec;
	__u32 prev_state;
	__u64 size;

	forget_irq_depth();
	forget_net_rx_raiser();
	if (!waiting)
		return 0;
	/* Else clang ORs the two lookup results, pointers, which the verifier refuses. */
	barrier_var(prev_is_target);
	barrier_var(next_is_target);
	/* As the kernel reports it: a preempted task is still runnable. */
	prev_state = preempt ? 0 : task_state(prev);
	if (prev_is_target)
		note_switch_out(BPF_CORE_READ(prev, pid), prev_state);
	if (next_is_target)
		note_switch_in(next_tid);
	if (next_tid == 0) {
		/* An idle CPU has nobody waiting: this heals any miscount. */
		*waiting = 0;
	} else {
		if (next_is_target && *waiting > 0)
			__sync_fetch_and_add(waiting, -1);
		if (prev_is_target && prev_state == 0)
			__sync_fetch_and_add(waiting, 1);
	}
	if (!prev_is_target && !next_is_target && *waiting <= 0)
		return 0;
	if (prev_is_target && (prev_state & LOUPE_TASK_DEAD))
		last_switch_of(prev, prev_tgid);
	rec = scratch_space();
	if (!rec)
		return 0;
	/* Stamped before the stacks are walked (~3 us): the kernel charges that
	 * walk to next, whose run began before this tracepoint, so a later
	 * stamp would make prev's on-CPU time that much longer than its own
	 * clock says at every switch-out. The size is known after the walk. */
	fill_header(&rec->hdr, LOUPE_REC_SCHED_SWITCH, 0);
	rec->prev_tid = BPF_CORE_READ(prev, pid);
	rec->prev_tgid = prev_tgid;
	rec->next_tid = next_tid;
	rec->next_tgid = next_tgid;
	rec->prev_state = prev_state;
	if (prev_is_target && prev_state == 0 && quota_throttled(prev))
		rec->prev_state |= LOUPE_SWITCH_THROTTLED;
	rec->user_depth = 0;
	rec->kernel_depth = 0;
	rec->stack_flags = 0;
	/* Its last switch may follow a switch-in the kernel did not report. */
	rec->prev_ran_ns = ran_since_arrival(prev);
	rec->prev_run_delay_ns = prev_is_target && bpf_core_field_exists(prev->sched_info.run_delay)
					 ? (__u32)BPF_CORE_READ(prev, sched_info.run_delay)
					 : 0;
	fill_comm(rec->prev_comm, prev, prev_is_target, rec->prev_tid);
	fill_comm(rec->next_comm, next, next_is_target, next_tid);
	/* The tracepoint runs on prev: its stacks say where it went off-CPU. */
	if (prev_is_target)
		capture_stacks(ctx, rec->frames, &rec->user_depth, &rec->kernel_depth,
			       &rec->stack_flags, LOUPE_CNT_STACK_TRUNCATED_SCHED,
			       cfg_offcpu_user_stacks, cfg_offcpu_kernel_stacks,
			       cfg_schedule_start, cfg_schedule_end);
	size = __builtin_offsetof(struct loupe_sched_switch, frames) +
	       ((__u64)rec->user_depth + rec->kernel_depth) * sizeof(__u64);
	rec->hdr.size = size;
	submit(rec, size, sizeof(*rec), LOUPE_CNT_RING_FULL_SCHED);
	return 0;
}

static __always_inline bool sleeper_still_queued(struct task_struct *task)
{
	if (!bpf_core_field_exists(task->se.sched_delayed))
		return false;
	return BPF_CORE_READ(task, se.sched_delayed) != 0;
}

static __always_inline void fill_wakeup(struct loupe_sched_wakeup *rec, struct task_struct *task,
					__u32 tgid, __u32 is_new, __u32 context)
{
	bool waker_is_task = context == LOUPE_WAKER_TASK;
	__u64 waker = bpf_get_current_pid_tgid();

	rec->woken_tid = BPF_CORE_READ(task, pid);
	rec->woken_tgid = tgid;
	rec->waker_tid = (__u32)waker;
	rec->target_cpu = BPF_CORE_READ(task, wake_cpu);
	rec->is_new = is_new;
	rec->context = context;
	/* In an interrupt, the current task is whoever was interrupted. */
	rec->waker_tgid = waker_is_task ? (__u32)(waker >> 32) : 0;
	fill_comm(rec->waker_comm, bpf_get_current_task_btf(),
		  !waker_is_task || is_target(rec->waker_tgid), rec->waker_tid);
}

static __always_inline int on_wakeup(struct task_struct *task, __u32 is_new, bool preempt_count)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct loupe_sched_wakeup *rec;
	struct racing_wakeup racing = {};
	struct thread_sleeps *sleeps;
	__u32 zero = 0, *timers;
	__u32 context, tid, asleep = 0;
	bool racing_sleep = false, on_rq;

	if (!is_target(tgid))
		return 0;
	tid = BPF_CORE_READ(task, pid);
	sleeps = bpf_map_lookup_elem(&thread_sleeps, &tid);
	/* The count before whether it is asleep, and both before on_rq: a
	 * sleep not yet seen here counts after its dequeue, so a count read
	 * first is the one from before any sleep this wakeup ends. */
	if (sleeps) {
		racing.sleeps = *(volatile __u32 *)&sleeps->count;
		barrier();
		asleep = *(volatile __u32 *)&sleeps->asleep;
	} else {
		racing.uncounted = 1;
		racing.voluntary_switches = BPF_CORE_READ(task, nvcsw);
	}
	barrier();
	on_rq = BPF_CORE_READ(task, on_rq);
	/* On its CPU, it is not asleep whatever the flag says: its switch-in
	 * may not have been reported. */
	if (asleep && BPF_CORE_READ(task, on_cpu))
		asleep = 0;
	/* Still on a run queue and not known asleep (racing_wakeups). Except a
	 * sleeper whose dequeue EEVDF delayed (Linux 6.12+): on_rq, yet asleep,
	 * and this wakeup is real. */
	if (!is_new && !asleep && on_rq && !sleeper_still_queued(task))
		racing_sleep = true;
	context = irq_context(preempt_count);
	timers = bpf_map_lookup_elem(&timer_contexts, &zero);
	if (timers && (*timers & (1u << context)))
		context = LOUPE_WAKER_TIMER;
	else if (context == LOUPE_WAKER_SOFTIRQ && net_rx_raised_by_current())
		context = LOUPE_WAKER_TASK;
	if (racing_sleep) {
		fill_header(&racing.rec.hdr, LOUPE_REC_SCHED_WAKEUP, sizeof(racing.rec));
		fill_wakeup(&racing.rec, task, tgid, is_new, context);
		/* With no room to keep it, written now: a wakeup too many (of a
		 * thread that did not sleep) rather than one lost unseen. */
		if (bpf_map_update_elem(&racing_wakeups, &tid, &racing, BPF_ANY) == 0)
			return 0;
	}
	/* A new task is on its final CPU already; a woken one may still be
	 * moved, which sched_migrate_task then accounts. */
	add_runnable(task_cpu(task), 1);
	rec = reserve_record(sizeof(*rec), LOUPE_REC_SCHED_WAKEUP, LOUPE_CNT_RING_FULL_SCHED);
	if (!rec)
		return 0;
	fill_wakeup(rec, task, tgid, is_new, context);
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

/* The kernel has woken a target (or set it running again): a wakeup kept
 * in racing_wakeups is written if the thread slept meanwhile. */
static __always_inline int on_woken(struct task_struct *task)
{
	__u32 tid = BPF_CORE_READ(task, pid);
	struct racing_wakeup *racing = bpf_map_lookup_elem(&racing_wakeups, &tid);

	if (!racing)
		return 0;
	if (sleeps_of(tid) != racing->sleeps ||
	    (racing->uncounted && BPF_CORE_READ(task, nvcsw) != racing->voluntary_switches)) {
		add_runnable(task_cpu(task), 1);
		submit(&racing->rec, sizeof(racing->rec), sizeof(racing->rec),
		       LOUPE_CNT_RING_FULL_SCHED);
	}
	bpf_map_delete_elem(&racing_wakeups, &tid);
	return 0;
}


static __always_inline int on_migrate(struct task_struct *task, __u32 dest_cpu)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct loupe_sched_migrate *rec;
	__u32 orig_cpu;

	if (!is_target(tgid))
		return 0;
	orig_cpu = task_cpu(task);
	/* Waiting: placed by its wakeup, or queued and not running. */
	if (task_state(task) == LOUPE_TASK_WAKING ||
	    (BPF_CORE_READ(task, on_rq) && !BPF_CORE_READ(task, on_cpu))) {
		add_runnable(orig_cpu, -1);
		add_runnable(dest_cpu, 1);
	}
	rec = reserve_record(sizeof(*rec), LOUPE_REC_SCHED_MIGRATE, LOUPE_CNT_RING_FULL_SCHED);
	if (!rec)
		return 0;
	rec->tid = BPF_CORE_READ(task, pid);
	rec->tgid = tgid;
	rec->orig_cpu = orig_cpu;
	rec->dest_cpu = dest_cpu;
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

/* Runs with its user's rights and no more, as ptrace would require of a
 * caller with that uid: every uid the caller's, every gid one, no
 * capabilities (a file's, or a setuid root program's). */
static __always_inline bool plain_user(struct task_struct *task)
{
	const struct cred *cred = BPF_CORE_READ(task, cred);
	__u64 permitted = 0;
	__u32 gid = BPF_CORE_READ(cred, gid.val);

	bpf_core_read(&permitted, sizeof(permitted), &cred->cap_permitted);
	return BPF_CORE_READ(cred, uid.val) == cfg_caller_uid &&
	       BPF_CORE_READ(cred, euid.val) == cfg_caller_uid &&
	       BPF_CORE_READ(cred, suid.val) == cfg_caller_uid &&
	       BPF_CORE_READ(cred, fsuid.val) == cfg_caller_uid &&
	       BPF_CORE_READ(cred, egid.val) == gid && BPF_CORE_READ(cred, sgid.val) == gid &&
	       BPF_CORE_READ(cred, fsgid.val) == gid && permitted == 0;
}

static __always_inline int on_exec(struct task_struct *task, pid_t old_pid,
				   struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct loupe_process_exec *rec;

	if (!is_target(tgid))
		return 0;
	/* The record still tells the daemon of the exec, which says why the
	 * process is no longer traced. */
	if (cfg_plain_user_only && !plain_user(task))
		bpf_map_delete_elem(&target_tgids, &tgid);
	rec = reserve_record(sizeof(*rec), LOUPE_REC_PROCESS_EXEC, LOUPE_CNT_RING_FULL_SCHED);
	if (!rec)
		return 0;
	/* A new image: the old tables no longer describe it. */
	bpf_map_delete_elem(&unwind_processes, &tgid);
	request_tables(tgid);
	rec->tid = BPF_CORE_READ(task, pid);
	rec->tgid = tgid;
	rec->old_tid = old_pid;
	rec->ran_ns = ran_since_arrival(task);
	bpf_probe_read_kernel_str(rec->filename, sizeof(rec->filename), BPF_CORE_READ(bprm, filename));
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int on_exit(struct task_struct *task)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct loupe_thread_exit *rec;
	__s32 *exiting, one = 1;
	__u32 group_dead;

	if (!is_target(tgid))
		return 0;
	group_dead = BPF_CORE_READ(task, signal, live.counter) == 0;
	exiting = bpf_map_lookup_elem(&exiting_threads, &tgid);
	if (exiting) {
		__sync_fetch_and_add(exiting, 1);
	} else if (bpf_map_update_elem(&exiting_threads, &tgid, &one, BPF_NOEXIST) != 0) {
		/* Another CPU's thread made it meanwhile. */
		exiting = bpf_map_lookup_elem(&exiting_threads, &tgid);
		if (exiting)
			__sync_fetch_and_add(exiting, 1);
	}
	rec = reserve_record(sizeof(*rec), LOUPE_REC_THREAD_EXIT, LOUPE_CNT_RING_FULL_SCHED);
	if (rec) {
		rec->tid = BPF_CORE_READ(task, pid);
		rec->tgid = tgid;
		rec->exit_code = BPF_CORE_READ(task, exit_code);
		rec->group_dead = group_dead;
		bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	}
	/* The process stays a target until its last thread's last switch
	 * (on_switch): until then it may still be preempted, and that switch
	 * says when it left its CPU. */
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
		return recording ? on_switch(ctx, preempt, prev, next) : 0;                  \
	}                                                                                    \
	SEC(kind "/sched_wakeup")                                                            \
	int BPF_PROG(handle_sched_woken##suffix, struct task_struct *task)                   \
	{                                                                                    \
		return recording ? on_woken(task) : 0;                                       \
	}                                                                                    \
	SEC(kind "/sched_wakeup_new")                                                        \
	int BPF_PROG(handle_sched_wakeup_new##suffix, struct task_struct *task)              \
	{                                                                                    \
		return recording ? on_wakeup(task, 1, false) : 0;                            \
	}                                                                                    \
	SEC(kind "/sched_migrate_task")                                                      \
	int BPF_PROG(handle_sched_migrate##suffix, struct task_struct *task, int dest_cpu)   \
	{                                                                                    \
		return recording ? on_migrate(task, dest_cpu) : 0;                           \
	}                                                                                    \
	SEC(kind "/sched_process_fork")                                                      \
	int BPF_PROG(handle_process_fork##suffix, struct task_struct *parent,                \
		     struct task_struct *child)                                              \
	{                                                                                    \
		return recording ? on_fork(parent, child) : 0;                               \
	}                                                                                    \
	SEC(kind "/sched_process_exec")                                                      \
	int BPF_PROG(handle_process_exec##suffix, struct task_struct *task, pid_t old_pid,   \
		     struct linux_binprm *bprm)                                              \
	{                                                                                    \
		return recording ? on_exec(task, old_pid, bprm) : 0;                          \
	}                                                                                    \
	SEC(kind "/sched_process_exit")                                                      \
	int BPF_PROG(handle_process_exit##suffix, struct task_struct *task)                  \
	{                                                                                    \
		return recording ? on_exit(task) : 0;                                        \
	}                                                                                    \
	SEC(kind "/task_rename")                                                             \
	int BPF_PROG(handle_task_rename##suffix, struct task_struct *task, const char *comm) \
	{                                                                                    \
		return recording ? on_rename(task, comm) : 0;                                \
	}

/* The handlers that name a waker's context, in two flavours: _pcnt reads
 * the preempt count, _irqd (where the kernel cannot give it) counts
 * interrupt edges (irq_depth); daemon/bpf/program_choice.h loads one. */
#define LOUPE_CONTEXT_HANDLERS(kind, suffix, flavour, preempt_count)                         \
	/* sched_waking, not sched_wakeup: it fires in the waker's context, where            \
	 * sched_wakeup may fire on the target CPU in the idle task (a wakeup the            \
	 * kernel queues there by IPI) and name no waker at all. */                          \
	SEC(kind "/sched_waking")                                                            \
	int BPF_PROG(handle_sched_wakeup##flavour##suffix, struct task_struct *task)         \
	{                                                                                    \
		return recording ? on_wakeup(task, 0, preempt_count) : 0;                    \
	}                                                                                    \
	/* Timer callbacks, for the wakeups they make: kept tiny, they run for               \
	 * every timer of the machine. */                                                    \
	SEC(kind "/hrtimer_expire_entry")                                                    \
	int handle_sched_timer_hr_entry##flavour##suffix(void *ctx)                          \
	{                                                                                    \
		return on_timer(true, preempt_count);                                        \
	}                                                                                    \
	SEC(kind "/hrtimer_expire_exit")                                                     \
	int handle_sched_timer_hr_exit##flavour##suffix(void *ctx)                           \
	{                                                                                    \
		return on_timer(false, preempt_count);                                       \
	}                                                                                    \
	SEC(kind "/timer_expire_entry")                                                      \
	int handle_sched_timer_entry##flavour##suffix(void *ctx)                             \
	{                                                                                    \
		return on_timer(true, preempt_count);                                        \
	}                                                                                    \
	SEC(kind "/timer_expire_exit")                                                       \
	int handle_sched_timer_exit##flavour##suffix(void *ctx)                              \
	{                                                                                    \
		return on_timer(false, preempt_count);                                       \
	}                                                                                    \
	/* Who raised the network receive softirq, for the wakeups it makes. */              \
	SEC(kind "/softirq_raise")                                                           \
	int BPF_PROG(handle_sched_net_rx_raise##flavour##suffix, unsigned int vec)           \
	{                                                                                    \
		return on_softirq_raise(vec, preempt_count);                                 \
	}                                                                                    \
	SEC(kind "/softirq_exit")                                                            \
	int BPF_PROG(handle_sched_net_rx_served##flavour##suffix, unsigned int vec)          \
	{                                                                                    \
		if (vec == LOUPE_NET_RX_SOFTIRQ)                                             \
			forget_net_rx_raiser();                                              \
		return 0;                                                                    \
	}

/* The interrupt edges that irq_depth counts, for the flavour without the
 * preempt count. Kept tiny: they run for every interrupt of the machine. */
#define LOUPE_IRQ_EDGE(kind, suffix, tracepoint, hard, entry)       \
	SEC(kind "/" #tracepoint)                                   \
	int handle_sched_irq_##tracepoint##_irqd##suffix(void *ctx) \
	{                                                           \
		return on_irq_edge(hard, entry);                    \
	}
#define LOUPE_IRQ_HANDLERS(kind, suffix)                                     \
	LOUPE_IRQ_EDGE(kind, suffix, irq_handler_entry, true, true)          \
	LOUPE_IRQ_EDGE(kind, suffix, irq_handler_exit, true, false)          \
	LOUPE_IRQ_EDGE(kind, suffix, softirq_entry, false, true)             \
	LOUPE_IRQ_EDGE(kind, suffix, softirq_exit, false, false)             \
	/* Linux 6.3+: a function another CPU asked this one to run (a block \
	 * completion sent to the CPU that submitted it). */                 \
	LOUPE_IRQ_EDGE(kind, suffix, csd_function_entry, true, true)         \
	LOUPE_IRQ_EDGE(kind, suffix, csd_function_exit, true, false)

LOUPE_HANDLERS("tp_btf", )
LOUPE_HANDLERS("raw_tp", _raw)
LOUPE_IRQ_HANDLERS("tp_btf", )
LOUPE_IRQ_HANDLERS("raw_tp", _raw)
LOUPE_CONTEXT_HANDLERS("tp_btf", , _irqd, false)
LOUPE_CONTEXT_HANDLERS("raw_tp", _raw, _irqd, false)
LOUPE_CONTEXT_HANDLERS("tp_btf", , _pcnt, true)
LOUPE_CONTEXT_HANDLERS("raw_tp", _raw, _pcnt, true)
