/* User stacks walked from unwind tables: the daemon compiles the DWARF CFI
 * (.eh_frame) of every executable file a target maps into rows, and the
 * program here finds, frame after frame, the mapping of the address, the row
 * that covers it, and from the row the caller's pc, sp and rbp. Code built
 * without frame pointers (Debian's libc, -O2 leaf functions) unwinds; a
 * frame-pointer walk reads junk there. Code no table covers (JIT code, V8's
 * builtins inside node's text) is stepped over by frame pointers, and the
 * frame it leads to must again lie in an executable mapping. A process
 * without tables yet (a child just forked, an exec) keeps its leaf only,
 * marked cut, and asks for tables. */
#ifndef LOUPE_BPF_INCLUDE_UNWIND_BPF_H_
#define LOUPE_BPF_INCLUDE_UNWIND_BPF_H_

#include "common.bpf.h"
#include "user_regs.bpf.h"

/* Off: user stacks by frame pointers only (tracectl attach --unwind=fp). */
const volatile bool cfg_unwind_tables = true;

/* The kernel text of the breakpoint exception's entry (asm_exc_int3) and of
 * uprobe_notify_resume, from kallsyms; 0 where unknown (no leaf is then
 * rewound: rewind_to_breakpoint). Set by louped between load and attach. */
volatile __u64 cfg_int3_entry_start = 0;
volatile __u64 cfg_int3_entry_end = 0;
volatile __u64 cfg_uprobe_resume_start = 0;
volatile __u64 cfg_uprobe_resume_end = 0;

/* Rows of every file, each file a sorted run; sized by the daemon. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loupe_unwind_row);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct loupe_unwind_key);
	__type(value, struct loupe_unwind_mapping);
} unwind_mappings SEC(".maps");

/* tgids whose mappings are in unwind_mappings. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} unwind_processes SEC(".maps");

/* tgids whose tables are missing or stale (a new child, an exec, a dlopen):
 * the daemon polls this and loads their mappings. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} unwind_refresh SEC(".maps");

/* The walk writes here, then the record takes a copy of the frames walked. */
struct unwind_frames {
	__u64 frames[LOUPE_MAX_STACK_DEPTH + 1];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_frames);
} unwind_buffer SEC(".maps");

/* Tables are looked up by binary search: 2^23 rows at most. */
#define LOUPE_UNWIND_SEARCH_STEPS 23
#define LOUPE_LOWEST_USER_ADDRESS 4096ULL
#define LOUPE_HIGHEST_USER_ADDRESS 0x00007fffffffffffULL

/* Where struct rt_sigframe's ucontext keeps the interrupted registers (the
 * trampoline runs with rsp at the ucontext: the handler's return popped
 * pretcode): uc_mcontext is 40 bytes in, then r8..r15, rdi, rsi, rbp, rbx,
 * rdx, rax, rcx, rsp, rip. */
#define LOUPE_SIGFRAME_RBP (40 + 10 * 8)
#define LOUPE_SIGFRAME_RSP (40 + 15 * 8)
#define LOUPE_SIGFRAME_RIP (40 + 16 * 8)

/* Where a leaf stands in a uprobe breakpoint's trap (in_breakpoint_window). */
enum breakpoint_trap {
	LOUPE_TRAP_NONE = 0,
	LOUPE_TRAP_UNHANDLED = 1, /* pc is one past the int3 at pc - 1 */
	LOUPE_TRAP_HANDLING = 2,  /* pc may be that, or rewound, or past an emulated instruction */
};

struct unwind_walk {
	__u64 pc;
	__u64 sp;
	__u64 bp;
	/* The thread's pending returns of %return-probed calls (NULL: none, the
	 * usual case), and the kernel's trampoline their return addresses were
	 * replaced with. */
	struct return_instance *pending;
	__u64 trampoline;
	/* Every general register by DWARF number, as the leaf had them: a CFA
	 * from rax..r15 (ld.so's lazy binding, OpenSSL's assembly) can be
	 * followed there, nowhere else. */
	__u64 leaf_regs[16];
	__u32 tgid;
	__u32 depth;
	__u32 flags;    /* enum loupe_stack_flag */
	bool exact;     /* pc is where the code was, not a return address */
	__u8 trap;      /* enum breakpoint_trap: in a breakpoint's trap, and how far */
	bool complete;  /* reached the stack's bottom */
	bool have_mapping;
	struct loupe_unwind_mapping mapping; /* of the last frame: callers often share it */
};

/* The walk's state lives here, not on the stack: the verifier tracks what
 * a program keeps on its stack, so each step of the walk it checked began
 * in a new state (another depth, another flag) and it went through the
 * step's every path hundreds of times: 46k instructions checked for the
 * switch program, 45k for the sampler, ~100 ms each of every attach. It
 * does not know what is read from a map, so a pass or two over the step
 * covers every state (4.4k and 2.6k instructions). Per CPU, as the frames'
 * buffer: a switch runs with interrupts off and a sample does not nest in
 * a sample. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unwind_walk);
} unwind_walks SEC(".maps");

static __always_inline void request_tables(__u32 tgid)
{
	__u8 yes = 1;

	bpf_map_update_elem(&unwind_refresh, &tgid, &yes, BPF_NOEXIST);
}

static __always_inline bool find_mapping(struct unwind_walk *walk)
{
	struct loupe_unwind_key key = {.prefixlen = 32 + 64, .tgid = walk->tgid};
	struct loupe_unwind_mapping *found;
	__u64 be = __builtin_bswap64(walk->pc);

	if (walk->have_mapping && walk->pc >= walk->mapping.start && walk->pc < walk->mapping.end)
		return true;
	__builtin_memcpy(key.address, &be, sizeof(be));
	found = bpf_map_lookup_elem(&unwind_mappings, &key);
	if (!found)
		return false;
	walk->mapping = *found;
	walk->have_mapping = true;
	return true;
}

/* One step of the binary search for a row, as a bpf_loop callback: the
 * verifier checks it once, where an unrolled loop of 23 steps cost it
 * ~0.35 s per program that unwinds (most of an attach). */
struct row_search {
	__u32 low;
	__u32 high;
	__u32 address;
	bool failed;
};

static long row_search_step(__u32 index, void *context)
{
	struct row_search *search = context;
	struct loupe_unwind_row *row;
	__u32 middle;

	if (search->low >= search->high)
		return 1;
	middle = search->low + (search->high - search->low) / 2;
	row = bpf_map_lookup_elem(&unwind_rows, &middle);
	if (!row) {
		search->failed = true;
		return 1;
	}
	if (row->address <= search->address)
		search->low = middle + 1;
	else
		search->high = middle;
	return 0;
}

/* The last row at or before `address` in [first, first + count), or NULL. */
static __always_inline struct loupe_unwind_row *find_row(__u32 first, __u32 count, __u32 address)
{
	struct row_search search = {.low = first, .high = first + count, .address = address};
	__u32 found;

	bpf_loop(LOUPE_UNWIND_SEARCH_STEPS, row_search_step, &search, 0);
	if (search.failed || search.low == first)
		return NULL;
	found = search.low - 1;
	return bpf_map_lookup_elem(&unwind_rows, &found);
}

static __always_inline bool read_user(__u64 *value, __u64 address)
{
	return bpf_probe_read_user(value, sizeof(*value), (const void *)address) == 0;
}

/* Pending returns looked through per trampoline: the walk resumes after
 * the last one matched, so only entries left by calls that never returned
 * (a longjmp past them) are skipped over. */
#define LOUPE_PENDING_RETURNS_MAX 8

/* The search for the pending return whose return address was in `slot`
 * (or `other_slot`), one entry per bpf_loop step: as a loop inlined at the
 * walk's three reads of a return address and where it leaves the
 * [uprobes] page, the verifier followed each iteration down every path
 * (5.2k instructions checked for the switch program against 4.4k). */
struct pending_search {
	struct return_instance *pending; /* the next to look at; after a match, the one after it */
	__u64 slot;
	__u64 other_slot;
	__u64 matched_slot;
	__u64 return_address;
	bool found;
};

static long pending_search_step(__u32 index, void *context)
{
	struct pending_search *search = context;
	struct return_instance *pending = search->pending;
	__u64 slot;

	if (!pending)
		return 1;
	search->pending = BPF_CORE_READ(pending, next);
	slot = BPF_CORE_READ(pending, stack);
	if (slot != search->slot && slot != search->other_slot)
		return 0;
	search->matched_slot = slot;
	search->return_address = BPF_CORE_READ(pending, orig_ret_vaddr);
	search->found = true;
	return 1;
}

/* Whether a pending return came from `slot` or `other_slot`: then its
 * return address, and the walk's list moved past it (the walk goes
 * outwards, the list too: innermost first). */
static __always_inline bool take_pending_return(struct unwind_walk *walk, __u64 slot,
						__u64 other_slot, struct pending_search *search)
{
	search->pending = walk->pending;
	search->slot = slot;
	search->other_slot = other_slot;
	search->found = false;
	bpf_loop(LOUPE_PENDING_RETURNS_MAX, pending_search_step, search, 0);
	if (!search->found)
		return false;
	walk->pending = search->pending;
	return true;
}

/* A %return probe replaced the return address in `slot` with the kernel's
 * trampoline (in its [uprobes] page) when the call began; the kernel keeps
 * the real one in the thread's list of pending returns, with the slot it
 * came from. Puts it back into walk->pc. */
static __always_inline void restore_return_address(struct unwind_walk *walk, __u64 slot)
{
	struct pending_search search = {};

	if (walk->pending && walk->pc == walk->trampoline &&
	    take_pending_return(walk, slot, slot, &search))
		walk->pc = search.return_address;
}

/* The kernel's [uprobes] page is cut into slots of this size: the first is
 * the return trampoline, the others hold copies of probed instructions. */
#define LOUPE_UPROBE_SLOT_BYTES 128
/* The return trampoline pushes rax, rcx and r11 before its system call
 * (Linux 6.11+; before, it is a lone int3 and pushes nothing). */
#define LOUPE_TRAMPOLINE_PUSHED (3 * 8)

/* A sample or switch can find the thread in the [uprobes] page, which has
 * no table and no frame of the program's. Two cases put it back in its
 * own code with the registers it has there:
 * - stepping over the copy of a probed instruction (or trapped just
 *   after it): the original is at the same offset from the probed
 *   address;
 * - in the return trampoline: the probed call has returned, its return
 *   popped, and the real return address is in the pending return whose
 *   slot was just above the stack pointer (or above the trampoline's
 *   three pushes, until the kernel drops them). Where the kernel has
 *   already taken that entry off the list, the leaf stays where it is. */
static __always_inline void leave_uprobe_page(struct unwind_walk *walk, struct uprobe_task *utask)
{
	__u64 copy = BPF_CORE_READ(utask, xol_vaddr);
	struct pending_search search = {};

	if (copy && walk->pc >= copy && walk->pc < copy + LOUPE_UPROBE_SLOT_BYTES) {
		walk->pc = BPF_CORE_READ(utask, vaddr) + (walk->pc - copy);
		return;
	}
	if (!walk->pending || walk->pc < walk->trampoline ||
	    walk->pc >= walk->trampoline + LOUPE_UPROBE_SLOT_BYTES)
		return;
	if (!take_pending_return(walk, walk->sp - 8, walk->sp + LOUPE_TRAMPOLINE_PUSHED - 8, &search))
		return;
	walk->pc = search.return_address;
	walk->sp = search.matched_slot + 8;
	/* Where the caller resumes, like any return address. */
	walk->exact = false;
}

/* Whether a row with a rule covers `pc` in the walk's mapping. */
static __always_inline bool has_row(struct unwind_walk *walk, __u64 pc)
{
	struct loupe_unwind_row *row;

	if (pc < walk->mapping.start || pc - walk->mapping.bias > 0xffffffffULL)
		return false;
	row = find_row(walk->mapping.first_row, walk->mapping.row_count,
		       (__u32)(pc - walk->mapping.bias));
	return row && row->kind != LOUPE_UNWIND_NONE;
}

/* A thread stopped by a uprobe's breakpoint has pc one byte past it until
 * the kernel's handler, on the thread's way back to user mode, rewinds it:
 * a sample in between would read the leaf's row at the wrong address, and
 * for a probe on a function's last instruction (a %return probe on its
 * final ret) past the function's end, where no row is and the walk stops.
 * The breakpoint is where the thread is before the handling begins
 * (in_breakpoint_window), when a row covers it (the int3 padding linkers
 * put between functions has none). While the handler runs, pc may be
 * rewound already; a pc no row covers is not, as real code (the probed
 * address, or past an emulated instruction) has one. */
static __always_inline void rewind_to_breakpoint(struct unwind_walk *walk)
{
	if (walk->trap == LOUPE_TRAP_NONE || walk->mapping.row_count == 0)
		return;
	if (walk->trap == LOUPE_TRAP_HANDLING && has_row(walk, walk->pc))
		return;
	if (has_row(walk, walk->pc - 1))
		walk->pc -= 1;
}

struct resume_search {
	__u32 count;
	bool found;
};

static long find_uprobe_resume(__u32 index, void *context)
{
	struct resume_search *search = context;
	struct unwind_frames *raw;
	__u32 zero = 0;
	__u64 frame;

	if (index >= search->count)
		return 1;
	raw = bpf_map_lookup_elem(&unwind_buffer, &zero);
	if (!raw)
		return 1;
	frame = raw->frames[index & LOUPE_MAX_STACK_DEPTH];
	if (frame >= cfg_uprobe_resume_start && frame < cfg_uprobe_resume_end) {
		search->found = true;
		return 1;
	}
	return 0;
}

/* Whether the current thread entered the kernel by a breakpoint (the
 * outermost kernel frame is the breakpoint's entry), and whether its uprobe
 * handling has begun (uprobe_notify_resume, which rewinds pc or emulates
 * the probed instruction, is on the stack): until then its saved pc is
 * still one past the int3 at pc - 1. After the handling returns, only
 * other pending work (a signal's delivery) runs with interrupts on before
 * user mode: rare, and it also needs an int3 byte before the new pc with a
 * row for it. Every interrupt and exception leaves orig_ax -1, a system
 * call its number; the byte before pc is read first, and the kernel stack
 * only when it is an int3 (rarely: a probed address, mostly). */
static __always_inline __u8 in_breakpoint_window(void *ctx, const struct loupe_user_regs *regs,
						 struct uprobe_task *utask)
{
	const long room = LOUPE_MAX_STACK_DEPTH * sizeof(__u64);
	struct resume_search search = {};
	struct unwind_frames *raw;
	__u32 zero = 0;
	__u64 outermost;
	__u8 byte = 0;
	long got;

	if (regs->orig_ax != (__u64)-1 || cfg_int3_entry_end == 0 || cfg_uprobe_resume_end == 0)
		return LOUPE_TRAP_NONE;
	/* Stepping over a probed instruction's copy is a trap too (#DB), after
	 * the breakpoint's handling. */
	if (utask && BPF_CORE_READ(utask, active_uprobe))
		return LOUPE_TRAP_NONE;
	if (bpf_probe_read_user(&byte, sizeof(byte), (const void *)(regs->ip - 1)) != 0 ||
	    byte != 0xcc)
		return LOUPE_TRAP_NONE;
	raw = bpf_map_lookup_elem(&unwind_buffer, &zero);
	if (!raw)
		return LOUPE_TRAP_NONE;
	got = bpf_get_stack(ctx, raw->frames, room, 0);
	search.count = (got > 0 ? got / sizeof(__u64) : 0) & LOUPE_MAX_STACK_DEPTH;
	if (search.count == 0)
		return LOUPE_TRAP_NONE;
	outermost = raw->frames[(search.count - 1) & LOUPE_MAX_STACK_DEPTH];
	if (outermost < cfg_int3_entry_start || outermost >= cfg_int3_entry_end)
		return LOUPE_TRAP_NONE;
	bpf_loop(LOUPE_MAX_STACK_DEPTH, find_uprobe_resume, &search, 0);
	return search.found ? LOUPE_TRAP_HANDLING : LOUPE_TRAP_UNHANDLED;
}

/* The caller's registers by the frame-pointer convention. A null rbp is
 * where the outermost frame leaves it. */
static __always_inline bool step_by_frame_pointer(struct unwind_walk *walk)
{
	__u64 bp = walk->bp;

	if (bp == 0) {
		walk->complete = true;
		return false;
	}
	if (bp < LOUPE_LOWEST_USER_ADDRESS || bp > LOUPE_HIGHEST_USER_ADDRESS)
		return false;
	if (!read_user(&walk->pc, bp + 8) || !read_user(&walk->bp, bp))
		return false;
	restore_return_address(walk, bp + 8);
	walk->sp = bp + 16;
	walk->exact = false;
	return true;
}

/* The caller's registers by the row covering pc; false stops the walk. */
static __always_inline bool step_by_table(struct unwind_walk *walk)
{
	struct loupe_unwind_mapping *mapping = &walk->mapping;
	struct loupe_unwind_row *row;
	__u64 address = walk->pc - mapping->bias;
	__u64 cfa;
	__s64 rbp_offset;

	/* A return address may be the first byte after a call to a function
	 * that does not return: the call itself is one byte before. */
	if (!walk->exact)
		address -= 1;
	if (address > 0xffffffffULL)
		return false;
	row = find_row(mapping->first_row, mapping->row_count, (__u32)address);
	if (!row || row->kind == LOUPE_UNWIND_NONE)
		return step_by_frame_pointer(walk);
	switch (row->kind) {
	case LOUPE_UNWIND_CFA_RSP:
		cfa = walk->sp + row->cfa_offset;
		break;
	case LOUPE_UNWIND_CFA_RBP:
		cfa = walk->bp + row->cfa_offset;
		break;
	case LOUPE_UNWIND_PLT:
		cfa = walk->sp + 8 + ((walk->pc & 15) >= 11 ? 8 : 0);
		break;
	case LOUPE_UNWIND_CFA_REG:
		if (walk->depth != 1)
			return false;
		cfa = walk->leaf_regs[row->cfa_register & 15] + row->cfa_offset;
		break;
	case LOUPE_UNWIND_CFA_DEREF_RBP:
		if (!read_user(&cfa, walk->bp + row->cfa_offset))
			return false;
		break;
	case LOUPE_UNWIND_OUTERMOST:
		walk->complete = true;
		return false;
	case LOUPE_UNWIND_SIGNAL:
		cfa = walk->sp;
		if (!read_user(&walk->bp, cfa + LOUPE_SIGFRAME_RBP) ||
		    !read_user(&walk->sp, cfa + LOUPE_SIGFRAME_RSP) ||
		    !read_user(&walk->pc, cfa + LOUPE_SIGFRAME_RIP))
			return false;
		walk->exact = true;
		return true;
	default:
		return false;
	}
	rbp_offset = row->rbp_offset;
	if (row->cfa_register & LOUPE_UNWIND_RBP_FROM_RBP) {
		if (!read_user(&walk->bp, walk->bp + rbp_offset))
			return false;
	} else if (rbp_offset != 0 && !read_user(&walk->bp, cfa + rbp_offset)) {
		return false;
	}
	if (!read_user(&walk->pc, cfa - 8))
		return false;
	restore_return_address(walk, cfa - 8);
	walk->sp = cfa;
	walk->exact = false;
	return true;
}

static long unwind_step(__u64 index, void *context)
{
	struct unwind_walk *walk;
	struct unwind_frames *out;
	__u32 zero = 0;

	walk = bpf_map_lookup_elem(&unwind_walks, &zero);
	if (!walk)
		return 1;
	if (walk->pc == 0) {
		/* Threads and processes start with a null return address. */
		walk->complete = true;
		return 1;
	}
	if (walk->pc < LOUPE_LOWEST_USER_ADDRESS || walk->pc > LOUPE_HIGHEST_USER_ADDRESS) {
		walk->flags |= LOUPE_STACK_UNWIND_STOPPED;
		return 1;
	}
	out = bpf_map_lookup_elem(&unwind_buffer, &zero);
	if (!out)
		return 1;
	if (!find_mapping(walk)) {
		/* Not in an executable mapping we know: code mapped since the
		 * tables were loaded (the leaf, which is where the thread really
		 * is, is kept), or junk a step read. */
		if (walk->depth == 0) {
			out->frames[0] = walk->pc;
			walk->depth = 1;
		}
		walk->flags |= LOUPE_STACK_UNWIND_STOPPED;
		request_tables(walk->tgid);
		return 1;
	}
	if (walk->depth == 0)
		rewind_to_breakpoint(walk);
	out->frames[walk->depth & LOUPE_MAX_STACK_DEPTH] =
		walk->pc | (walk->exact && walk->depth > 0 ? LOUPE_FRAME_EXACT : 0);
	walk->depth++;
	if (walk->depth >= LOUPE_MAX_STACK_DEPTH)
		return 1;
	if (walk->mapping.row_count == 0 ? !step_by_frame_pointer(walk) : !step_by_table(walk)) {
		if (!walk->complete)
			walk->flags |= LOUPE_STACK_UNWIND_STOPPED;
		return 1;
	}
	return 0;
}

/* Walks the current task's user stack from its saved user registers (the
 * interrupted code for a sample taken in user mode, the system call's
 * caller otherwise) into `frames`. Returns the depth; sets *flags. */
static __always_inline __u32 unwind_user_stack(void *ctx, __u64 *frames, __u32 tgid,
					       __u32 *flags, __u32 truncated)
{
	struct task_struct *task = bpf_get_current_task_btf();
	const struct loupe_user_regs *regs = user_regs((void *)bpf_task_pt_regs(task));
	struct unwind_walk *walk;
	struct unwind_frames *out;
	__u32 zero = 0, depth;

	walk = bpf_map_lookup_elem(&unwind_walks, &zero);
	if (!walk)
		return 0;
	__builtin_memset(walk, 0, sizeof(*walk));
	walk->tgid = tgid;
	walk->exact = true;
	walk->pc = regs->ip;
	walk->sp = regs->sp;
	walk->bp = regs->bp;
	walk->leaf_regs[0] = regs->ax;
	walk->leaf_regs[1] = regs->dx;
	walk->leaf_regs[2] = regs->cx;
	walk->leaf_regs[3] = regs->bx;
	walk->leaf_regs[4] = regs->si;
	walk->leaf_regs[5] = regs->di;
	walk->leaf_regs[6] = regs->bp;
	walk->leaf_regs[7] = regs->sp;
	walk->leaf_regs[8] = regs->r8;
	walk->leaf_regs[9] = regs->r9;
	walk->leaf_regs[10] = regs->r10;
	walk->leaf_regs[11] = regs->r11;
	walk->leaf_regs[12] = regs->r12;
	walk->leaf_regs[13] = regs->r13;
	walk->leaf_regs[14] = regs->r14;
	walk->leaf_regs[15] = regs->r15;
	/* A kernel built without uprobes has no uprobe state (nor %return
	 * probes); a thread that never hit a probe has none either. */
	if (bpf_core_field_exists(task->utask)) {
		struct uprobe_task *utask = BPF_CORE_READ(task, utask);

		walk->trap = in_breakpoint_window(ctx, regs, utask);
		if (utask) {
			walk->pending = BPF_CORE_READ(utask, return_instances);
			if (walk->pending)
				walk->trampoline =
					BPF_CORE_READ(task, mm, uprobes_state.xol_area, vaddr);
			leave_uprobe_page(walk, utask);
		}
	}
	bpf_loop(LOUPE_MAX_STACK_DEPTH, unwind_step, NULL, 0);
	*flags = walk->flags | LOUPE_STACK_CFI;
	depth = walk->depth;
	if (depth >= LOUPE_MAX_STACK_DEPTH && !walk->complete)
		count(truncated);
	out = bpf_map_lookup_elem(&unwind_buffer, &zero);
	if (!out || depth == 0)
		return 0;
	depth &= LOUPE_MAX_STACK_DEPTH;
	if (bpf_probe_read_kernel(frames, depth * sizeof(__u64), out->frames) != 0)
		return 0;
	return depth;
}

/* Where a kernel stack taken inside a tracepoint starts: the tracer's own
 * frames (the BPF program, bpf_trace_runN, the tracepoint's iterator; how
 * many depends on the kernel) come before the first frame inside the traced
 * function [own_start, own_end). Leaves `frames` as bpf_get_stack wrote them
 * when that function is not among the first frames. */
#define LOUPE_TRACER_FRAMES_MAX 8

static __always_inline __u32 kernel_stack_from(void *ctx, __u64 *frames, __u64 own_start,
					       __u64 own_end)
{
	const long room = LOUPE_MAX_STACK_DEPTH * sizeof(__u64);
	struct unwind_frames *raw;
	__u32 zero = 0, skip = 0, n;
	long got;

	raw = bpf_map_lookup_elem(&unwind_buffer, &zero);
	if (!raw)
		return 0;
	got = bpf_get_stack(ctx, raw->frames, room, 0);
	n = (got > 0 ? got / sizeof(__u64) : 0) & LOUPE_MAX_STACK_DEPTH;
	for (__u32 i = 0; i < LOUPE_TRACER_FRAMES_MAX && i < n; i++) {
		if (raw->frames[i] >= own_start && raw->frames[i] < own_end) {
			skip = i;
			break;
		}
	}
	n = (n - skip) & LOUPE_MAX_STACK_DEPTH;
	if (n == 0 || bpf_probe_read_kernel(frames, n * sizeof(__u64), &raw->frames[skip]) != 0)
		return 0;
	return n;
}

/* The leaf alone, while louped loads the process's tables: a frame-pointer
 * walk would read junk through code without frame pointers, or skip
 * callers unseen. */
static __always_inline __u32 leaf_until_tables(__u64 *frames, __u32 tgid, __u32 *flags)
{
	const struct loupe_user_regs *regs =
		user_regs((void *)bpf_task_pt_regs(bpf_get_current_task_btf()));
	__u64 pc = regs->ip;

	request_tables(tgid);
	*flags = LOUPE_STACK_CFI | LOUPE_STACK_UNWIND_STOPPED;
	if (pc < LOUPE_LOWEST_USER_ADDRESS || pc > LOUPE_HIGHEST_USER_ADDRESS)
		return 0;
	frames[0] = pc;
	return 1;
}

/* The current task's user then kernel stack into `frames` (room for
 * 2 * LOUPE_MAX_STACK_DEPTH): from unwind tables (the leaf only while the
 * process has none yet), or by frame pointers (--unwind=fp). A kernel
 * stack taken in a tracepoint starts in the traced function [own_start,
 * own_end) when that is given (not 0). */
static __always_inline void capture_stacks(void *ctx, __u64 *frames, __u16 *user_depth,
					   __u16 *kernel_depth, __u32 *stack_flags,
					   __u32 truncated, bool user_stack, bool kernel_stack,
					   __u64 own_start, __u64 own_end)
{
	const long room = LOUPE_MAX_STACK_DEPTH * sizeof(__u64);
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 user = 0;
	long n;

	*stack_flags = 0;
	/* A thread on its way out has let go of its address space: no user
	 * stack is left to walk, and a walk would read nothing and call that
	 * a cut. */
	if (user_stack && !bpf_get_current_task_btf()->mm)
		user_stack = false;
	if (user_stack) {
		if (cfg_unwind_tables && bpf_map_lookup_elem(&unwind_processes, &tgid)) {
			user = unwind_user_stack(ctx, frames, tgid, stack_flags, truncated);
		} else if (cfg_unwind_tables) {
			user = leaf_until_tables(frames, tgid, stack_flags);
		} else {
			n = bpf_get_stack(ctx, frames, room, BPF_F_USER_STACK);
			user = n > 0 ? n / sizeof(__u64) : 0;
			if (user == LOUPE_MAX_STACK_DEPTH)
				count(truncated);
		}
	}
	/* The mask is for the verifier: the kernel stack's offset stays inside
	 * the buffer. */
	user &= LOUPE_MAX_STACK_DEPTH;
	__u32 kernel = 0;

	if (kernel_stack && own_end != 0) {
		kernel = kernel_stack_from(ctx, &frames[user], own_start, own_end);
	} else if (kernel_stack) {
		n = bpf_get_stack(ctx, &frames[user], room, 0);
		kernel = n > 0 ? n / sizeof(__u64) : 0;
	}
	kernel &= LOUPE_MAX_STACK_DEPTH;

	if (kernel == LOUPE_MAX_STACK_DEPTH)
		count(truncated);
	*user_depth = user;
	*kernel_depth = kernel;
}

#endif /* LOUPE_BPF_INCLUDE_UNWIND_BPF_H_ */
