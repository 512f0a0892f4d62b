#include "daemon/session/uprobe_pairer.h"

#include <variant>

#include "daemon/base/overloaded.h"

namespace loupe::session {

void UprobePairer::Observe(format::Record& record) {
  std::visit(Overloaded{
                 [&](const format::UprobeEntry& entry) {
                   std::vector<uint64_t>& stack = entries_[Key(record.tid, entry.probe.data())];
                   if (stack.size() < kMaxDepth) stack.push_back(record.time_ns);
                 },
                 [&](format::UprobeReturn& ret) { Pair(record, ret); },
                 [&](const format::ThreadExit&) {
                   absl::erase_if(entries_,
                                  [&](const auto& e) { return e.first.first == record.tid; });
                 },
                 // Not calls.
                 [](const format::ClockSync&) {}, [](const format::ProcessInfo&) {},
                 [](const format::ThreadInfo&) {}, [](const format::ProcessFork&) {},
                 [](const format::ProcessExec&) {}, [](const format::SchedSwitch&) {},
                 [](const format::SchedWakeup&) {}, [](const format::SchedMigrate&) {},
                 [](const format::CpuSample&) {}, [](const format::OffCpu&) {},
                 [](const format::UsdtEvent&) {}, [](const format::SpanBegin&) {},
                 [](const format::SpanEnd&) {}, [](const format::Instant&) {},
                 [](const format::Counter&) {}, [](const format::OperationBegin&) {},
                 [](const format::OperationEnd&) {}, [](const format::Loss&) {}},
             record.payload);
}

void UprobePairer::Pair(const format::Record& record, format::UprobeReturn& ret) {
  auto it = entries_.find(Key(record.tid, ret.probe.data()));
  if (it == entries_.end()) return;  // entered before tracing began
  ret.duration_ns = record.time_ns - it->second.back();
  it->second.pop_back();
  if (it->second.empty()) entries_.erase(it);
}

size_t UprobePairer::open_calls() const {
  size_t open = 0;
  for (const auto& [key, stack] : entries_) open += stack.size();
  return open;
}

}  // namespace loupe::session
