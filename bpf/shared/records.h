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
};

/* Per-CPU counters of everything a BPF program could not deliver. */
enum loupe_counter {
	LOUPE_CNT_RING_FULL_SCHED = 0,
	LOUPE_CNT_MAX,
};

struct loupe_record_header {
	__u16 type;  /* enum loupe_record_type */
	__u16 size;  /* of the whole record, header included */
	__u32 cpu;
	__u64 time_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
};

struct loupe_sched_switch {
	struct loupe_record_header hdr;
	__u32 prev_tid;
	__u32 prev_tgid;
	__u32 next_tid;
	__u32 next_tgid;
	__u32 prev_state;
	__u32 pad;
};

#endif /* LOUPE_BPF_SHARED_RECORDS_H_ */
