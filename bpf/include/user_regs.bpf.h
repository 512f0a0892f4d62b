/* The user registers an x86-64 kernel saves on entry (struct pt_regs), read
 * at fixed offsets rather than through CO-RE. The layout is x86-64's ABI
 * (ptrace and signal frames depend on it), so relocating it buys nothing,
 * and an object with no CO-RE relocation at all loads without libbpf
 * parsing the kernel's BTF: ~45 ms of page faults per object on a VM
 * (docs/performance.md, attach). */
#ifndef LOUPE_BPF_INCLUDE_USER_REGS_BPF_H_
#define LOUPE_BPF_INCLUDE_USER_REGS_BPF_H_

#include "vmlinux.h"

/* Declared after vmlinux.h, outside its preserve_access_index region. */
struct loupe_user_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	__u64 ax, cx, dx, si, di, orig_ax;
	__u64 ip, cs, flags, sp, ss;
};

#define LOUPE_SAME_OFFSET(field) \
	(__builtin_offsetof(struct loupe_user_regs, field) == __builtin_offsetof(struct pt_regs, field))
_Static_assert(sizeof(struct loupe_user_regs) == sizeof(struct pt_regs) &&
		       LOUPE_SAME_OFFSET(r15) && LOUPE_SAME_OFFSET(r14) && LOUPE_SAME_OFFSET(r13) &&
		       LOUPE_SAME_OFFSET(r12) && LOUPE_SAME_OFFSET(bp) && LOUPE_SAME_OFFSET(bx) &&
		       LOUPE_SAME_OFFSET(r11) && LOUPE_SAME_OFFSET(r10) && LOUPE_SAME_OFFSET(r9) &&
		       LOUPE_SAME_OFFSET(r8) && LOUPE_SAME_OFFSET(ax) && LOUPE_SAME_OFFSET(cx) &&
		       LOUPE_SAME_OFFSET(dx) && LOUPE_SAME_OFFSET(si) && LOUPE_SAME_OFFSET(di) &&
		       LOUPE_SAME_OFFSET(orig_ax) && LOUPE_SAME_OFFSET(ip) && LOUPE_SAME_OFFSET(flags) &&
		       LOUPE_SAME_OFFSET(sp),
	       "struct loupe_user_regs follows the kernel's struct pt_regs");
#undef LOUPE_SAME_OFFSET

/* A uprobe's context, or what bpf_task_pt_regs returns. */
static __always_inline const struct loupe_user_regs *user_regs(const void *regs)
{
	return (const struct loupe_user_regs *)regs;
}

#endif  /* LOUPE_BPF_INCLUDE_USER_REGS_BPF_H_ */
