/* Maps and helpers every Loupe BPF program shares. Each object defines the
 * maps; the daemon makes the objects of one session share them (the ring,
 * the targets, the counters) with bpf_map__reuse_fd before loading. */
#ifndef LOUPE_BPF_INCLUDE_COMMON_BPF_H_
#define LOUPE_BPF_INCLUDE_COMMON_BPF_H_

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "shared/records.h"

/* Sized by the daemon before load (ring_buffer_size). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

/* tgids being traced: the daemon adds the targets, BPF adds children. */
#define LOUPE_MAX_TARGETS 8192
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LOUPE_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} target_tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOUPE_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Room to build a record with stacks: too big for the BPF stack. */
#define LOUPE_MAX(a, b) ((a) > (b) ? (a) : (b))
struct loupe_scratch {
	__u64 bytes[(LOUPE_MAX(LOUPE_MAX(sizeof(struct loupe_cpu_sample),
					 sizeof(struct loupe_sched_switch)),
			       sizeof(struct loupe_usdt_event)) +
		     7) / 8];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct loupe_scratch);
} scratch SEC(".maps");

static __always_inline void count(__u32 counter)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &counter);

	if (value)
		*value += 1;
}

static __always_inline bool is_target(__u32 tgid)
{
	return bpf_map_lookup_elem(&target_tgids, &tgid) != NULL;
}

static __always_inline void *scratch_space(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&scratch, &zero);
}

static __always_inline void fill_header(struct loupe_record_header *hdr, __u16 type, __u16 size)
{
	hdr->type = type;
	hdr->size = size;
	hdr->cpu = bpf_get_smp_processor_id();
	hdr->time_ns = bpf_ktime_get_ns();
}

/* Reserves a fixed-size record and fills its header, or counts the ring
 * being full under `ring_full` and returns NULL. */
static __always_inline void *reserve_record(__u64 size, __u16 type, __u32 ring_full)
{
	struct loupe_record_header *hdr = bpf_ringbuf_reserve(&events, size, 0);

	if (!hdr) {
		count(ring_full);
		return NULL;
	}
	fill_header(hdr, type, size);
	return hdr;
}

/* Sends a record of `size` bytes (<= max) without waking the reader: the
 * daemon drains in batches. */
static __always_inline void submit(void *rec, __u64 size, __u64 max, __u32 ring_full)
{
	if (size > max)
		size = max;
	if (bpf_ringbuf_output(&events, rec, size, BPF_RB_NO_WAKEUP) != 0)
		count(ring_full);
}

#endif /* LOUPE_BPF_INCLUDE_COMMON_BPF_H_ */
