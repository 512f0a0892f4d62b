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

static_assert(sizeof(loupe_sched_switch) == 40);
static_assert(offsetof(loupe_sched_switch, prev_tid) == 16);
static_assert(offsetof(loupe_sched_switch, next_tid) == 24);
static_assert(offsetof(loupe_sched_switch, prev_state) == 32);

}  // namespace
}  // namespace loupe::bpf
