/* Records that BPF programs hand to the daemon through the ring buffer. The
 * ONE header both sides include: fixed-width, explicitly padded, no pointers.
 * Every record starts with loupe_record_header. The C++ side static_asserts
 * sizes and offsets (daemon/bpf/records_check.cc). */
#ifndef LOUPE_BPF_SHARED_RECORDS_H_
#define LOUPE_BPF_SHARED_RECORDS_H_

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum loupe_record_type {
	LOUPE_REC_SCHED_SWITCH = 1,
	LOUPE_REC_SCHED_WAKEUP = 2,
	LOUPE_REC_PROCESS_FORK = 3,
	LOUPE_REC_PROCESS_EXEC = 4,
	LOUPE_REC_THREAD_EXIT = 5,
	LOUPE_REC_THREAD_NAME = 6,
	LOUPE_REC_CPU_SAMPLE = 7,
};

/* Per-CPU counters of everything a BPF program could not deliver whole. */
enum loupe_counter {
	LOUPE_CNT_RING_FULL_SCHED = 0,
	LOUPE_CNT_RING_FULL_CPU = 1,
	LOUPE_CNT_STACK_TRUNCATED_SCHED = 2,
	LOUPE_CNT_STACK_TRUNCATED_CPU = 3,
	LOUPE_CNT_TARGETS_FULL = 4, /* a child to follow did not fit the target map */
	LOUPE_CNT_MAX,
};

#define LOUPE_MAX_STACK_DEPTH 127 /* a mask too: keep it 2^n - 1 */
#define LOUPE_COMM_LEN 16
#define LOUPE_PATH_LEN 256

struct loupe_record_header {
	__u16 type; /* enum loupe_record_type */
	__u16 size; /* of the whole record, header included */
	__u32 cpu;
	__u64 time_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
};

/* Stacks travel as user frames then kernel frames; records are cut after
 * the last frame, so `size` varies. */
struct loupe_sched_switch {
	struct loupe_record_header hdr;
	__u32 prev_tid;
	__u32 prev_tgid;
	__u32 next_tid;
	__u32 next_tgid;
	__u32 prev_state;
	__u16 user_depth;   /* stacks of prev at switch-out, when prev is a target */
	__u16 kernel_depth;
	__u64 frames[2 * LOUPE_MAX_STACK_DEPTH];
};

struct loupe_sched_wakeup {
	struct loupe_record_header hdr;
	__u32 woken_tid;
	__u32 woken_tgid;
	__u32 waker_tid;
	__u32 target_cpu;
	__u32 is_new;
	__u32 pad;
};

struct loupe_process_fork {
	struct loupe_record_header hdr;
	__u32 parent_tid;
	__u32 parent_tgid;
	__u32 child_tid;
	__u32 child_tgid;
};

struct loupe_process_exec {
	struct loupe_record_header hdr;
	__u32 tid;
	__u32 tgid;
	char filename[LOUPE_PATH_LEN];
};

struct loupe_thread_exit {
	struct loupe_record_header hdr;
	__u32 tid;
	__u32 tgid;
	__s32 exit_code;
	__u32 group_dead;
};

struct loupe_thread_name {
	struct loupe_record_header hdr;
	__u32 tid;
	__u32 tgid;
	char comm[LOUPE_COMM_LEN];
};

struct loupe_cpu_sample {
	struct loupe_record_header hdr;
	__u32 tid;
	__u32 tgid;
	__u16 user_depth;
	__u16 kernel_depth;
	__u32 pad;
	__u64 frames[2 * LOUPE_MAX_STACK_DEPTH];
};

#endif /* LOUPE_BPF_SHARED_RECORDS_H_ */
