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
	/* From the shim (loupe/loupe.h): struct loupe_shim_event, except instant. */
	LOUPE_REC_SPAN_BEGIN = 8,  /* name, span id, parent id, operation id */
	LOUPE_REC_SPAN_END = 9,    /* span id */
	LOUPE_REC_INSTANT = 10,    /* struct loupe_shim_instant */
	LOUPE_REC_COUNTER = 11,    /* name, value type, value bits */
	LOUPE_REC_OPERATION_BEGIN = 12, /* operation id, name */
	LOUPE_REC_OPERATION_END = 13,   /* operation id */
	LOUPE_REC_SHIM_THREAD_NAME = 14, /* name */
	LOUPE_REC_TRIGGER = 15,    /* name */
	LOUPE_REC_USDT = 16,       /* struct loupe_usdt_event */
	LOUPE_REC_UPROBE_ENTRY = 17, /* struct loupe_uprobe_event */
	LOUPE_REC_UPROBE_RETURN = 18,
	LOUPE_REC_SCHED_MIGRATE = 19, /* struct loupe_sched_migrate */
	LOUPE_REC_OPERATION_PASS = 20, /* operation id: its end on this thread, not its end */
};

/* Where a wakeup came from; mirrors format::WakerContext. */
enum loupe_waker_context {
	LOUPE_WAKER_TASK = 0,
	LOUPE_WAKER_HARDIRQ = 1,
	LOUPE_WAKER_SOFTIRQ = 2,
	LOUPE_WAKER_TIMER = 3,
	LOUPE_WAKER_NMI = 4,
};

/* Per-CPU counters of everything a BPF program could not deliver whole. */
enum loupe_counter {
	LOUPE_CNT_RING_FULL_SCHED = 0,
	LOUPE_CNT_RING_FULL_CPU = 1,
	LOUPE_CNT_STACK_TRUNCATED_SCHED = 2,
	LOUPE_CNT_STACK_TRUNCATED_CPU = 3,
	LOUPE_CNT_TARGETS_FULL = 4, /* a child to follow did not fit the target map */
	LOUPE_CNT_RING_FULL_SHIM = 5,
	LOUPE_CNT_RING_FULL_USDT = 6,
	LOUPE_CNT_RING_FULL_UPROBE = 7,
	LOUPE_CNT_MAX,
};

#define LOUPE_MAX_STACK_DEPTH 127 /* a mask too: keep it 2^n - 1 */

/* How a user stack was walked and where the walk ended (stack_flags). */
enum loupe_stack_flag {
	LOUPE_STACK_CFI = 1,            /* from unwind tables (else frame pointers) */
	LOUPE_STACK_UNWIND_STOPPED = 2, /* cut: an address no table or mapping covers */
};
/* A user frame whose address is exact, not a return address: the leaf is
 * implied; this marks the code a signal interrupted. */
#define LOUPE_FRAME_EXACT (1ULL << 63)
#define LOUPE_COMM_LEN 16
#define LOUPE_PATH_LEN 256

struct loupe_record_header {
	__u16 type; /* enum loupe_record_type */
	__u16 size; /* of the whole record, header included */
	__u32 cpu;
	__u64 time_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
};

/* In a switch's prev_state: a preempted target whose cgroup has spent its
 * CPU quota, so that it waits for the quota, not for a CPU. */
#define LOUPE_SWITCH_THROTTLED (1u << 29)

/* The kernel's TASK_DEAD in a switch's prev_state: an exited thread's last
 * switch. */
#define LOUPE_TASK_DEAD 0x80u

/* Stacks travel as user frames then kernel frames; records are cut after
 * the last frame, so `size` varies. */
struct loupe_sched_switch {
	struct loupe_record_header hdr;
	__u32 prev_tid;
	__u32 prev_tgid;
	__u32 next_tid;
	__u32 next_tgid;
	__u32 prev_state;   /* the kernel's, with LOUPE_SWITCH_THROTTLED */
	__u16 user_depth;   /* stacks of prev at switch-out, when prev is a target */
	__u16 kernel_depth;
	__u32 stack_flags;  /* enum loupe_stack_flag */
	/* How long prev ran since the kernel last put it on a CPU, by the
	 * kernel's own accounting (0: unknown, or 4.29 s and more). Places a
	 * switch-in the tracepoint never reported, also before a process's
	 * last switch, when it is no target any more. */
	__u32 prev_ran_ns;
	/* The low 32 bits of prev's time queued in all (the kernel's
	 * sched_info.run_delay; 0 where the kernel keeps none): from one of a
	 * thread's switch-outs to its next, its wait for the switch-in between,
	 * which places a wakeup the trace lacks (missed_wakeups.h). */
	__u32 prev_run_delay_ns;
	/* Names of the sides that are not targets (the threads that held a CPU
	 * a target waited for); all zero for a target and for the idle task. */
	char prev_comm[LOUPE_COMM_LEN];
	char next_comm[LOUPE_COMM_LEN];
	__u64 frames[2 * LOUPE_MAX_STACK_DEPTH];
};

struct loupe_sched_wakeup {
	struct loupe_record_header hdr;
	__u32 woken_tid;
	__u32 woken_tgid;
	__u32 waker_tid;
	__u32 target_cpu;
	__u32 is_new;
	__u32 context; /* enum loupe_waker_context */
	/* A task waker that is not a target: its process and name, for the
	 * daemon to describe (the thread that woke a target may never have held
	 * a CPU the target waited for). Zero otherwise. */
	__u32 waker_tgid;
	char waker_comm[LOUPE_COMM_LEN];
};

/* A target moved to another CPU's run queue while waiting for a CPU. */
struct loupe_sched_migrate {
	struct loupe_record_header hdr;
	__u32 tid;
	__u32 tgid;
	__u32 orig_cpu;
	__u32 dest_cpu;
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
	/* The thread that called exec, before it took the main thread's tid
	 * (the same as tid when the main thread called it). */
	__u32 old_tid;
	/* How long that thread had run since its last arrival on a CPU, by
	 * the run queue's clock as last brought up to date (so up to a tick
	 * short; 0 where unknown): places a switch-in the tracepoint did not
	 * report, when no later switch-out of it will be recorded (a process
	 * dropped at this exec). */
	__u32 ran_ns;
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
	__u32 stack_flags; /* enum loupe_stack_flag */
	__u64 frames[2 * LOUPE_MAX_STACK_DEPTH];
};

/* Shim probes pass up to four 64-bit values in rdi, rsi, rdx, rcx (see
 * loupe/loupe.h); names travel as addresses that the daemon reads once. */
struct loupe_shim_event {
	struct loupe_record_header hdr;
	__u32 tid;
	__u32 tgid;
	__u64 args[4];
};

#define LOUPE_SHIM_MAX_FIELDS 8
#define LOUPE_SHIM_MAX_STRING 256

/* struct loupe_field of loupe/loupe.h, as it lies in the application. */
struct loupe_shim_field {
	__u64 key; /* address of the name */
	__u32 type;
	__u32 length;
	__u64 value;
};

/* Cut after the fields when no field is a string. */
struct loupe_shim_instant {
	struct loupe_record_header hdr;
	__u32 tid;
	__u32 tgid;
	__u64 name;
	__u64 operation;
	__u32 count;      /* fields copied */
	__u32 read_error; /* the field array or a string could not be read */
	struct loupe_shim_field fields[LOUPE_SHIM_MAX_FIELDS];
	char strings[LOUPE_SHIM_MAX_FIELDS][LOUPE_SHIM_MAX_STRING];
};

/* USDT arguments as the daemon decoded each site's note. */
#define LOUPE_USDT_MAX_ARGS 12
/* The longest string argument a session may ask for; each session keeps up
 * to its own cap (cfg_usdt_string_cap, 256 by default) of every string. */
#define LOUPE_USDT_MAX_STRING 4096
#define LOUPE_USDT_DEFAULT_STRING 256
#define LOUPE_USDT_MAX_SPECS 4096

enum loupe_usdt_arg_kind {
	LOUPE_USDT_CONST = 1,     /* value */
	LOUPE_USDT_REG = 2,       /* the register at reg_offset in pt_regs */
	LOUPE_USDT_REG_DEREF = 3, /* memory at register + value */
	LOUPE_USDT_IP_DEREF = 4,  /* memory at the probe's address + value (RIP-relative) */
};

struct loupe_usdt_arg {
	__s64 value;
	__u16 reg_offset;
	__u8 kind;
	__u8 size; /* 1, 2, 4 or 8 bytes */
	__u8 is_signed;
	__u8 pad[3];
};

struct loupe_usdt_spec {
	__u32 probe; /* the daemon's probe id */
	__u8 arg_count;
	__s8 string_arg; /* the argument to read a string from, -1: none */
	__u16 pad;
	struct loupe_usdt_arg args[LOUPE_USDT_MAX_ARGS];
};

enum loupe_usdt_flags {
	LOUPE_USDT_STRING = 1,     /* a string argument was asked for */
	LOUPE_USDT_STRING_CUT = 2, /* it was longer than the session's cap */
};

/* Cut after the string's kept bytes (no NUL), or before it when none was
 * asked for or it could not be read. */
struct loupe_usdt_event {
	struct loupe_record_header hdr;
	__u32 tid;
	__u32 tgid;
	__u32 probe;
	__u16 arg_count;
	__s16 string_length; /* bytes kept, < 0: the read's error */
	__u16 flags;         /* enum loupe_usdt_flags */
	__u16 pad[3];
	__s64 args[LOUPE_USDT_MAX_ARGS];
	char string[LOUPE_USDT_MAX_STRING + 2]; /* one more and the NUL, to tell a cut */
};

/* The uprobe's bpf cookie: probe id << 8 | integer arguments to capture,
 * with LOUPE_UPROBE_GO_ABI set for a Go function, whose integer arguments
 * come in rax, rbx, rcx, rdi, rsi, r8 (Go's register ABI), not the C ABI's. */
#define LOUPE_UPROBE_MAX_ARGS 6
#define LOUPE_UPROBE_GO_ABI 0x80
struct loupe_uprobe_event {
	struct loupe_record_header hdr;
	__u32 tid;
	__u32 tgid;
	__u32 probe;
	__u32 arg_count;
	__s64 values[LOUPE_UPROBE_MAX_ARGS]; /* arguments, or the return value first */
	/* The user stack pointer: at a function's entry and at its ret it points
	 * at the same return address (past the kernel's return trampoline, 8
	 * more), which pairs a return with its own call when an exception left
	 * calls above it without one. */
	__u64 sp;
};

/* Unwind tables (daemon/bpf/unwind_maps.h fills them from the CFI of the
 * targets' files; bpf/include/unwind.bpf.h walks them). */
enum loupe_unwind_kind {
	LOUPE_UNWIND_NONE = 0,      /* no FDE covers it: frame pointers are tried */
	LOUPE_UNWIND_CFA_RSP = 1,   /* CFA = rsp + cfa_offset */
	LOUPE_UNWIND_CFA_RBP = 2,   /* CFA = rbp + cfa_offset */
	LOUPE_UNWIND_OUTERMOST = 3, /* the bottom of the stack */
	LOUPE_UNWIND_SIGNAL = 4,    /* signal trampoline: registers in the ucontext at rsp */
	LOUPE_UNWIND_PLT = 5,       /* CFA = rsp + 8, + 8 more from byte 11 of a 16-byte stub */
	LOUPE_UNWIND_CFA_REG = 6,   /* CFA = cfa_register + cfa_offset: known at the leaf only */
	LOUPE_UNWIND_UNSUPPORTED = 7, /* a rule not followed here: the walk stops */
	LOUPE_UNWIND_CFA_DEREF_RBP = 8, /* CFA = *(rbp + cfa_offset): a realigned frame */
};
/* In cfa_register: rbp was saved at rbp + rbp_offset, not CFA + rbp_offset. */
#define LOUPE_UNWIND_RBP_FROM_RBP 0x80

/* What bpf/thread_regs.bpf.c writes of a thread asleep (a task iterator
 * given its tid), for the daemon to walk its user stack when it slept
 * through a whole trace: the user registers its kernel entry saved, and
 * the pending returns of its %return-probed calls (unwind.bpf.h). */
#define LOUPE_THREAD_REGS 21 /* struct pt_regs, x86-64: r15 r14 r13 r12 bp bx r11 r10 r9 r8
				ax cx dx si di orig_ax ip cs flags sp ss */
#define LOUPE_THREAD_PENDING_MAX 8

struct loupe_pending_return {
	__u64 slot;           /* where the return address was on the stack */
	__u64 return_address; /* what the kernel's trampoline replaced there */
};

struct loupe_thread_state {
	__u32 tid;
	__u32 pending_count;
	__u64 trampoline; /* the return trampoline in the [uprobes] page; 0: no pending returns */
	__u64 switches;   /* its context switches so far: it ran between two reads if they differ */
	__u64 regs[LOUPE_THREAD_REGS];
	struct loupe_pending_return pending[LOUPE_THREAD_PENDING_MAX]; /* innermost first */
};

/* The rule from `address` (an ELF virtual address of the file) to the next
 * row's; the return address is at CFA - 8. */
struct loupe_unwind_row {
	__u32 address;
	__u8 kind; /* enum loupe_unwind_kind */
	__u8 cfa_register; /* DWARF number for LOUPE_UNWIND_CFA_REG; | LOUPE_UNWIND_RBP_FROM_RBP */
	__s16 rbp_offset; /* rbp saved at CFA + rbp_offset; 0: unchanged */
	__s32 cfa_offset;
};

/* An executable mapping of a process, found by longest-prefix match on
 * (tgid, address); the address is big-endian so prefixes are its high bits. */
struct loupe_unwind_key {
	__u32 prefixlen; /* 32 (tgid) + bits of the address */
	__u32 tgid;
	__u8 address[8];
};

struct loupe_unwind_mapping {
	__u64 start;
	__u64 end;
	__u64 bias;      /* address - bias = the file's virtual address */
	__u32 first_row; /* in unwind_rows */
	__u32 row_count; /* 0: no table (JIT code, a file without CFI): frame pointers */
};

#endif /* LOUPE_BPF_SHARED_RECORDS_H_ */
