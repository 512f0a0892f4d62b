#include "daemon/format/record.h"

#include <array>

#include "loupe/v1/trace.pb.h"

namespace loupe::format {
namespace {

// The C++ enums are the proto enums by another name; keep them in lockstep.
static_assert(static_cast<int>(RecordKind::kClockSync) == v1::CLOCK_SYNC);
static_assert(static_cast<int>(RecordKind::kSchedSwitch) == v1::SCHED_SWITCH);
static_assert(static_cast<int>(RecordKind::kOffCpu) == v1::OFF_CPU);
static_assert(static_cast<int>(RecordKind::kUsdt) == v1::USDT);
static_assert(static_cast<int>(RecordKind::kInstant) == v1::INSTANT);
static_assert(kMaxRecordKind == v1::RecordKind_MAX);
static_assert(static_cast<int>(RecordKind::kSchedMigrate) == v1::SCHED_MIGRATE);
static_assert(kMaxWakerContext == v1::WakerContext_MAX);
static_assert(static_cast<int>(ValueType::kBytes) == v1::VALUE_BYTES);
static_assert(kMaxLossSource == v1::LossSource_MAX);
static_assert(kMaxLossReason == v1::LossReason_MAX);

constexpr std::array<std::string_view, kMaxRecordKind + 1> kKindNames = {
    "unknown",       "clock_sync",   "process_info",    "thread_info",
    "process_fork",  "process_exec", "thread_exit",     "sched_switch",
    "sched_wakeup",  "cpu_sample",   "off_cpu",         "uprobe_entry",
    "uprobe_return", "usdt",         "span_begin",      "span_end",
    "instant",       "counter",      "operation_begin", "operation_end",
    "loss",          "sched_migrate",
};
constexpr std::array<std::string_view, kMaxWakerContext + 1> kWakerContextNames = {
    "task", "hardirq", "softirq", "timer", "nmi", "unreported",
};
constexpr std::array<std::string_view, kMaxLossSource + 1> kSourceNames = {
    "unknown", "sched", "cpu_sample", "uprobe",  "usdt",
    "shim",    "merge", "writer",     "shipper", "symbolizer",
};
constexpr std::array<std::string_view, kMaxLossReason + 1> kReasonNames = {
    "unknown",     "ring_full",    "stack_truncated", "string_truncated",
    "late",        "queue_full",   "segment_evicted", "shipping_abandoned",
    "cap_reached", "write_failed", "malformed",       "unwind_stopped",
    "unreadable",
};

template <typename Names>
std::string_view NameOf(const Names& names, int value) {
  return value > 0 && value < static_cast<int>(names.size()) ? names[value] : names[0];
}

}  // namespace

std::string_view KindName(RecordKind kind) { return NameOf(kKindNames, static_cast<int>(kind)); }
std::string_view WakerContextName(WakerContext context) {
  const int value = static_cast<int>(context);
  return value >= 0 && value <= kMaxWakerContext ? kWakerContextNames[value] : "unknown";
}
std::string_view LossSourceName(LossSource source) {
  return NameOf(kSourceNames, static_cast<int>(source));
}
std::string_view LossReasonName(LossReason reason) {
  return NameOf(kReasonNames, static_cast<int>(reason));
}

}  // namespace loupe::format
