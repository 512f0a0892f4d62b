#include "daemon/session/operation_tracker.h"

#include <algorithm>
#include <variant>

#include "daemon/base/overloaded.h"

namespace loupe::session {

void OperationTracker::Observe(format::Record& record) {
  const auto stamp = [&](uint64_t& operation_id) {
    if (auto it = scopes_.find(record.tid); it != scopes_.end()) operation_id = it->second.back();
  };
  std::visit(Overloaded{
                 [&](const format::OperationBegin& begin) {
                   std::vector<uint64_t>& stack = scopes_[record.tid];
                   if (stack.size() < kMaxDepth) stack.push_back(begin.operation_id);
                 },
                 [&](const format::OperationEnd& end) { End(record.tid, end.operation_id); },
                 [&](const format::ThreadExit&) { scopes_.erase(record.tid); },
                 [&](format::CpuSample& sample) { stamp(sample.operation_id); },
                 [&](format::OffCpu& off) { stamp(off.operation_id); },
                 // Only samples and off-CPU intervals are stamped.
                 [](const format::SpanBegin&) {}, [](const format::Instant&) {},
                 [](const format::ClockSync&) {}, [](const format::ProcessInfo&) {},
                 [](const format::ThreadInfo&) {}, [](const format::ProcessFork&) {},
                 [](const format::ProcessExec&) {}, [](const format::SchedSwitch&) {},
                 [](const format::SchedWakeup&) {}, [](const format::SchedMigrate&) {},
                 [](const format::UprobeEntry&) {}, [](const format::UprobeReturn&) {},
                 [](const format::UsdtEvent&) {}, [](const format::SpanEnd&) {},
                 [](const format::Counter&) {}, [](const format::Loss&) {}},
             record.payload);
}

void OperationTracker::End(uint32_t tid, uint64_t operation_id) {
  auto it = scopes_.find(tid);
  if (it == scopes_.end()) return;
  std::vector<uint64_t>& stack = it->second;
  // Ends the innermost scope with this id, and any left open inside it.
  auto found = std::find(stack.rbegin(), stack.rend(), operation_id);
  if (found != stack.rend()) stack.erase(std::next(found).base(), stack.end());
  if (stack.empty()) scopes_.erase(it);
}

}  // namespace loupe::session
