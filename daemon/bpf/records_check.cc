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
static_assert(offsetof(loupe_sched_switch, frames) == 40);
static_assert(sizeof(loupe_sched_switch) == 40 + 2 * 8 * LOUPE_MAX_STACK_DEPTH);

static_assert(sizeof(loupe_sched_wakeup) == 40);
static_assert(sizeof(loupe_process_fork) == 32);
static_assert(sizeof(loupe_process_exec) == 24 + LOUPE_PATH_LEN);
static_assert(sizeof(loupe_thread_exit) == 32);
static_assert(sizeof(loupe_thread_name) == 24 + LOUPE_COMM_LEN);

static_assert(offsetof(loupe_cpu_sample, user_depth) == 24);
static_assert(offsetof(loupe_cpu_sample, frames) == 32);
static_assert(sizeof(loupe_cpu_sample) == 32 + 2 * 8 * LOUPE_MAX_STACK_DEPTH);

}  // namespace
}  // namespace loupe::bpf
