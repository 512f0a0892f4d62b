// The record layout shared with BPF (bpf/shared/records.h), pinned down:
// a change on one side that the other does not match fails to compile.
#include <cstddef>

#include "shared/records.h"

namespace loupe::bpf {
namespace {

static_assert(sizeof(loupe_record_header) == 16);
static_assert(offsetof(loupe_record_header, type) == 0);
static_assert(offsetof(loupe_record_header, size) == 2);
static_assert(offsetof(loupe_record_header, cpu) == 4);
static_assert(offsetof(loupe_record_header, time_ns) == 8);

static_assert(offsetof(loupe_sched_switch, prev_tid) == 16);
static_assert(offsetof(loupe_sched_switch, next_tid) == 24);
static_assert(offsetof(loupe_sched_switch, prev_state) == 32);
static_assert(offsetof(loupe_sched_switch, user_depth) == 36);
static_assert(offsetof(loupe_sched_switch, stack_flags) == 40);
static_assert(offsetof(loupe_sched_switch, prev_ran_ns) == 44);
static_assert(offsetof(loupe_sched_switch, prev_run_delay_ns) == 48);
static_assert(offsetof(loupe_sched_switch, prev_comm) == 52);
static_assert(offsetof(loupe_sched_switch, next_comm) == 52 + LOUPE_COMM_LEN);
// 4 bytes of padding before the frames, 8-aligned on both sides.
static_assert(offsetof(loupe_sched_switch, frames) == 88);
static_assert(sizeof(loupe_sched_switch) == 88 + 2 * 8 * LOUPE_MAX_STACK_DEPTH);

static_assert(sizeof(loupe_sched_wakeup) == 64);
static_assert(offsetof(loupe_sched_wakeup, context) == 36);
static_assert(offsetof(loupe_sched_wakeup, waker_tgid) == 40);
static_assert(offsetof(loupe_sched_wakeup, waker_comm) == 44);
static_assert(sizeof(loupe_sched_migrate) == 32);
static_assert(offsetof(loupe_sched_migrate, dest_cpu) == 28);
static_assert(sizeof(loupe_process_fork) == 32);
static_assert(sizeof(loupe_process_exec) == 32 + LOUPE_PATH_LEN);
static_assert(sizeof(loupe_thread_exit) == 32);
static_assert(sizeof(loupe_thread_name) == 24 + LOUPE_COMM_LEN);

static_assert(sizeof(loupe_shim_event) == 56);
static_assert(sizeof(loupe_shim_field) == 24);
static_assert(offsetof(loupe_shim_instant, fields) == 48);
static_assert(offsetof(loupe_shim_instant, strings) == 48 + 24 * LOUPE_SHIM_MAX_FIELDS);
static_assert(sizeof(loupe_usdt_arg) == 16);
static_assert(sizeof(loupe_usdt_spec) == 8 + 16 * LOUPE_USDT_MAX_ARGS);
static_assert(offsetof(loupe_usdt_event, flags) == 32);
static_assert(offsetof(loupe_usdt_event, args) == 40);
static_assert(offsetof(loupe_usdt_event, string) == 40 + 8 * LOUPE_USDT_MAX_ARGS);
static_assert(sizeof(loupe_uprobe_event) == 32 + 8 * LOUPE_UPROBE_MAX_ARGS + 8);

static_assert(offsetof(loupe_cpu_sample, user_depth) == 24);
static_assert(offsetof(loupe_cpu_sample, stack_flags) == 28);
static_assert(offsetof(loupe_cpu_sample, frames) == 32);
static_assert(sizeof(loupe_cpu_sample) == 32 + 2 * 8 * LOUPE_MAX_STACK_DEPTH);

static_assert(sizeof(loupe_unwind_row) == 12);
static_assert(offsetof(loupe_unwind_row, cfa_offset) == 8);
static_assert(sizeof(loupe_unwind_key) == 16);
static_assert(sizeof(loupe_unwind_mapping) == 32);

}  // namespace
}  // namespace loupe::bpf
