#include "daemon/session/operation_tracker.h"

#include <algorithm>

namespace loupe::session {

void OperationTracker::Observe(format::Record& record) {
  if (const auto* begin = std::get_if<format::OperationBegin>(&record.payload)) {
    std::vector<uint64_t>& stack = scopes_[record.tid];
    if (stack.size() < kMaxDepth) stack.push_back(begin->operation_id);
  } else if (const auto* end = std::get_if<format::OperationEnd>(&record.payload)) {
    auto it = scopes_.find(record.tid);
    if (it == scopes_.end()) return;
    std::vector<uint64_t>& stack = it->second;
    // Ends the innermost scope with this id, and any left open inside it.
    auto found = std::find(stack.rbegin(), stack.rend(), end->operation_id);
    if (found != stack.rend()) stack.erase(std::next(found).base(), stack.end());
    if (stack.empty()) scopes_.erase(it);
  } else if (std::holds_alternative<format::ThreadExit>(record.payload)) {
    scopes_.erase(record.tid);
  } else if (auto* sample = std::get_if<format::CpuSample>(&record.payload)) {
    if (auto it = scopes_.find(record.tid); it != scopes_.end()) {
      sample->operation_id = it->second.back();
    }
  } else if (auto* off = std::get_if<format::OffCpu>(&record.payload)) {
    if (auto it = scopes_.find(record.tid); it != scopes_.end()) {
      off->operation_id = it->second.back();
    }
  }
}

}  // namespace loupe::session
