// SPDX-License-Identifier: GPL-2.0
/* Probes in the application: the shim's USDT sites (arguments in fixed
 * registers, so no per-site decoding), USDT sites of any provider (arguments
 * decoded from the spec the daemon parsed out of the site's note, found by
 * the attach cookie), and uprobes/uretprobes on functions. */
#include "include/common.bpf.h"
#include "include/user_regs.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set when the probes are attached to every process mapping the binary
 * (following children), or for a caller that is not root (a target that
 * exec'd a setuid program is dropped, its pid's probes stay): then only
 * targets' events are kept. */
const volatile bool cfg_filter_targets = false;
/* Bytes of a USDT string argument kept, at most LOUPE_USDT_MAX_STRING. */
const volatile __u32 cfg_usdt_string_cap = LOUPE_USDT_DEFAULT_STRING;

/* Set by the daemon once every site is attached and cleared before any is
 * detached: links come and go one at a time (and a detached program stops
 * before its breakpoint and semaphore go), so without it the trace would
 * start and end with some probes on and others off (a span's end without
 * its begin). */
volatile bool recording = false;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LOUPE_USDT_MAX_SPECS);
	__type(key, __u32);
	__type(value, struct loupe_usdt_spec);
} usdt_specs SEC(".maps");

static __always_inline bool wanted(__u64 id)
{
	return recording && (!cfg_filter_targets || is_target(id >> 32));
}

static __always_inline int emit_shim(struct pt_regs *ctx, __u16 type)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct loupe_shim_event *rec;

	if (!wanted(id))
		return 0;
	rec = reserve_record(sizeof(*rec), type, LOUPE_CNT_RING_FULL_SHIM);
	if (!rec)
		return 0;
	rec->tid = (__u32)id;
	rec->tgid = id >> 32;
	rec->args[0] = user_regs(ctx)->di;
	rec->args[1] = user_regs(ctx)->si;
	rec->args[2] = user_regs(ctx)->dx;
	rec->args[3] = user_regs(ctx)->cx;
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("uprobe")
int handle_shim_span_begin(struct pt_regs *ctx)
{
	return emit_shim(ctx, LOUPE_REC_SPAN_BEGIN);
}

SEC("uprobe")
int handle_shim_span_end(struct pt_regs *ctx)
{
	return emit_shim(ctx, LOUPE_REC_SPAN_END);
}

SEC("uprobe")
int handle_shim_counter(struct pt_regs *ctx)
{
	return emit_shim(ctx, LOUPE_REC_COUNTER);
}

SEC("uprobe")
int handle_shim_operation_begin(struct pt_regs *ctx)
{
	return emit_shim(ctx, LOUPE_REC_OPERATION_BEGIN);
}

SEC("uprobe")
int handle_shim_operation_end(struct pt_regs *ctx)
{
	return emit_shim(ctx, LOUPE_REC_OPERATION_END);
}

SEC("uprobe")
int handle_shim_operation_pass(struct pt_regs *ctx)
{
	return emit_shim(ctx, LOUPE_REC_OPERATION_PASS);
}

SEC("uprobe")
int handle_shim_thread_name(struct pt_regs *ctx)
{
	return emit_shim(ctx, LOUPE_REC_SHIM_THREAD_NAME);
}

SEC("uprobe")
int handle_shim_trigger(struct pt_regs *ctx)
{
	return emit_shim(ctx, LOUPE_REC_TRIGGER);
}

/* Instant events: the field array lives in the application's stack frame,
 * and string values are copied now, bounded, while they still exist. */
SEC("uprobe")
int handle_shim_instant(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct loupe_shim_instant *rec;
	__u64 count = user_regs(ctx)->cx;
	bool strings = false;
	__u64 size;

	if (!wanted(id))
		return 0;
	rec = scratch_space();
	if (!rec)
		return 0;
	rec->tid = (__u32)id;
	rec->tgid = id >> 32;
	rec->name = user_regs(ctx)->di;
	rec->operation = user_regs(ctx)->si;
	rec->read_error = 0;
	if (count > LOUPE_SHIM_MAX_FIELDS)
		count = LOUPE_SHIM_MAX_FIELDS;
	rec->count = count;
	if (count > 0 &&
	    bpf_probe_read_user(rec->fields, count * sizeof(rec->fields[0]),
				(const void *)user_regs(ctx)->dx) != 0) {
		rec->read_error = 1;
		rec->count = 0;
	}
	for (__u32 i = 0; i < LOUPE_SHIM_MAX_FIELDS && i < rec->count; i++) {
		struct loupe_shim_field *field = &rec->fields[i];
		__u32 length = field->length;

		if (field->type != 5 /* LOUPE_FIELD_STRING */)
			continue;
		strings = true;
		if (length > LOUPE_SHIM_MAX_STRING)
			length = LOUPE_SHIM_MAX_STRING;
		if (length > 0 &&
		    bpf_probe_read_user(rec->strings[i], length, (const void *)field->value) != 0)
			rec->read_error = 1;
	}
	size = strings ? sizeof(*rec) : __builtin_offsetof(struct loupe_shim_instant, strings);
	fill_header(&rec->hdr, LOUPE_REC_INSTANT, size);
	submit(rec, size, sizeof(*rec), LOUPE_CNT_RING_FULL_SHIM);
	return 0;
}

static __always_inline __s64 usdt_arg(struct pt_regs *ctx, const struct loupe_usdt_arg *arg)
{
	__u64 value = 0;
	__u64 address;
	__u32 shift;

	switch (arg->kind) {
	case LOUPE_USDT_CONST:
		return arg->value;
	case LOUPE_USDT_REG:
		bpf_probe_read_kernel(&value, sizeof(value), (void *)ctx + (arg->reg_offset & 0xff));
		break;
	case LOUPE_USDT_REG_DEREF:
		bpf_probe_read_kernel(&address, sizeof(address), (void *)ctx + (arg->reg_offset & 0xff));
		bpf_probe_read_user(&value, sizeof(value), (void *)(address + arg->value));
		break;
	case LOUPE_USDT_IP_DEREF:
		address = user_regs(ctx)->ip + arg->value;
		bpf_probe_read_user(&value, sizeof(value), (void *)address);
		break;
	default:
		return 0;
	}
	/* Keep the argument's own width and sign (x86 is little-endian). */
	shift = (8 - (arg->size & 7)) * 8;
	if (arg->size >= 8 || arg->size == 0)
		return value;
	value <<= shift;
	return arg->is_signed ? ((__s64)value) >> shift : value >> shift;
}

SEC("uprobe")
int handle_usdt(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 spec_id = bpf_get_attach_cookie(ctx);
	const struct loupe_usdt_spec *spec;
	struct loupe_usdt_event *rec;
	__u64 size;
	long n;

	if (!wanted(id))
		return 0;
	spec = bpf_map_lookup_elem(&usdt_specs, &spec_id);
	rec = scratch_space();
	if (!spec || !rec)
		return 0;
	rec->tid = (__u32)id;
	rec->tgid = id >> 32;
	rec->probe = spec->probe;
	rec->arg_count = spec->arg_count;
	rec->string_length = 0;
	for (__u32 i = 0; i < LOUPE_USDT_MAX_ARGS; i++) {
		if (i >= spec->arg_count)
			break;
		rec->args[i] = usdt_arg(ctx, &spec->args[i]);
	}
	rec->flags = 0;
	size = __builtin_offsetof(struct loupe_usdt_event, string);
	if (spec->string_arg >= 0 && spec->string_arg < LOUPE_USDT_MAX_ARGS) {
		__u32 cap = cfg_usdt_string_cap;

		if (cap > LOUPE_USDT_MAX_STRING)
			cap = LOUPE_USDT_MAX_STRING;
		rec->flags = LOUPE_USDT_STRING;
		/* Room for one byte more than the cap, and the NUL: a
		 * string that fills it did not fit, one that does not is
		 * whole (a string of exactly the cap included). */
		n = bpf_probe_read_user_str(rec->string, cap + 2,
					    (const void *)rec->args[spec->string_arg & 15]);
		if (n > 0) {
			n -= 1; /* the NUL */
			if (n > cap) {
				n = cap;
				rec->flags |= LOUPE_USDT_STRING_CUT;
			}
			size += n & (LOUPE_USDT_MAX_STRING * 2 - 1);
		}
		rec->string_length = n;
	}
	fill_header(&rec->hdr, LOUPE_REC_USDT, size);
	submit(rec, size, sizeof(*rec), LOUPE_CNT_RING_FULL_USDT);
	return 0;
}

SEC("uprobe")
int handle_uprobe_entry(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 ax, bx, cx, dx, di, si, r8, r9, sp;
	const struct loupe_user_regs *regs;
	struct loupe_uprobe_event *rec;
	bool go;

	if (!wanted(id))
		return 0;
	rec = reserve_record(sizeof(*rec), LOUPE_REC_UPROBE_ENTRY, LOUPE_CNT_RING_FULL_UPROBE);
	if (!rec)
		return 0;
	rec->tid = (__u32)id;
	rec->tgid = id >> 32;
	rec->probe = cookie >> 8;
	rec->arg_count = cookie & 0xff & ~LOUPE_UPROBE_GO_ABI;
	/* Every register read first, each at its fixed offset in the context:
	 * read in the branches, clang shares a moved context pointer between
	 * them, which the verifier refuses. */
	regs = user_regs(ctx);
	ax = regs->ax;
	bx = regs->bx;
	cx = regs->cx;
	dx = regs->dx;
	di = regs->di;
	si = regs->si;
	r8 = regs->r8;
	r9 = regs->r9;
	sp = regs->sp;
	go = (cookie & LOUPE_UPROBE_GO_ABI) != 0;
	rec->values[0] = go ? ax : di;
	rec->values[1] = go ? bx : si;
	rec->values[2] = go ? cx : dx;
	rec->values[3] = go ? di : cx;
	rec->values[4] = go ? si : r8;
	rec->values[5] = go ? r8 : r9;
	rec->sp = sp;
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

struct stack_bounds {
	__u64 start, end;
};

static long note_mapping(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct stack_bounds *bounds = data;

	bounds->start = BPF_CORE_READ(vma, vm_start);
	bounds->end = BPF_CORE_READ(vma, vm_end);
	return 0;
}

/* An entry at stack pointer `sp` whose two values are the bounds of the
 * mapping that stack is in (none when `bounds` is empty): where an
 * exception is caught or a longjmp lands, for the daemon to end the calls
 * left below it on that stack. */
static __always_inline void submit_unwinding(struct pt_regs *ctx, __u64 id, __u64 sp,
					     const struct stack_bounds *bounds)
{
	struct loupe_uprobe_event *rec;

	rec = reserve_record(sizeof(*rec), LOUPE_REC_UPROBE_ENTRY, LOUPE_CNT_RING_FULL_UPROBE);
	if (!rec)
		return;
	rec->tid = (__u32)id;
	rec->tgid = id >> 32;
	rec->probe = bpf_get_attach_cookie(ctx) >> 8;
	rec->arg_count = bounds->end != 0 ? 2 : 0;
	rec->values[0] = bounds->start;
	rec->values[1] = bounds->end;
	rec->sp = sp;
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
}

/* __cxa_begin_catch, where a C++ exception is caught: an entry whose two
 * values are the bounds of the mapping its stack pointer is in, so that
 * the daemon ends only the calls the exception unwound on this stack, not
 * those open on another (a fiber's, a signal's alternate stack). None when
 * the mapping cannot be looked up (its lock contended). */
SEC("uprobe")
int handle_uprobe_catch(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct stack_bounds bounds = {};
	__u64 sp;

	if (!wanted(id))
		return 0;
	sp = user_regs(ctx)->sp;
	bpf_find_vma(bpf_get_current_task_btf(), sp, note_mapping, &bounds, 0);
	submit_unwinding(ctx, id, sp, &bounds);
	return 0;
}

/* glibc's x86-64 jmp_buf: the stack pointer the jump restores is its 7th
 * word, mangled with the thread's pointer guard (at %fs:0x30): xored, then
 * rotated left 17 bits (sysdeps/unix/sysv/linux/x86_64/pointer_guard.h). */
#define JMP_BUF_SP_OFFSET (6 * 8)
#define POINTER_GUARD_OFFSET 0x30

/* glibc's longjmp (and siglongjmp, __longjmp_chk), its jmp_buf the first
 * argument: an entry whose stack pointer is the one the jump lands on,
 * its two values the bounds of the mapping that stack is in. The calls it
 * leaves are those below it there. Nothing is written when the jmp_buf,
 * the guard or the mapping cannot be read: its calls then read as begun
 * without an end. */
SEC("uprobe")
int handle_uprobe_longjmp(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *task = bpf_get_current_task_btf();
	struct stack_bounds bounds = {};
	__u64 mangled, guard, sp;
	__u64 fsbase;

	if (!wanted(id))
		return 0;
	fsbase = BPF_CORE_READ(task, thread.fsbase);
	if (bpf_probe_read_user(&mangled, sizeof(mangled),
				(const void *)(user_regs(ctx)->di + JMP_BUF_SP_OFFSET)) != 0 ||
	    bpf_probe_read_user(&guard, sizeof(guard),
				(const void *)(fsbase + POINTER_GUARD_OFFSET)) != 0)
		return 0;
	sp = ((mangled >> 17) | (mangled << 47)) ^ guard;
	bpf_find_vma(task, sp, note_mapping, &bounds, 0);
	if (bounds.end != 0)
		submit_unwinding(ctx, id, sp, &bounds);
	return 0;
}

SEC("uretprobe")
int handle_uprobe_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct loupe_uprobe_event *rec;

	if (!wanted(id))
		return 0;
	rec = reserve_record(sizeof(*rec), LOUPE_REC_UPROBE_RETURN, LOUPE_CNT_RING_FULL_UPROBE);
	if (!rec)
		return 0;
	rec->tid = (__u32)id;
	rec->tgid = id >> 32;
	rec->probe = cookie >> 8;
	rec->arg_count = 1;
	rec->values[0] = user_regs(ctx)->ax;
	rec->sp = user_regs(ctx)->sp;
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

_Static_assert(sizeof(struct loupe_shim_instant) <= sizeof(struct loupe_scratch) &&
		       sizeof(struct loupe_usdt_event) <= sizeof(struct loupe_scratch),
	       "probe records are built in the scratch space");
