#include "daemon/session/uprobe_pairer.h"

namespace loupe::session {

void UprobePairer::Observe(format::Record& record) {
  if (const auto* entry = std::get_if<format::UprobeEntry>(&record.payload)) {
    std::vector<uint64_t>& stack = entries_[Key(record.tid, entry->probe.data())];
    if (stack.size() < kMaxDepth) stack.push_back(record.time_ns);
  } else if (auto* ret = std::get_if<format::UprobeReturn>(&record.payload)) {
    auto it = entries_.find(Key(record.tid, ret->probe.data()));
    if (it == entries_.end()) return;  // entered before tracing began
    ret->duration_ns = record.time_ns - it->second.back();
    it->second.pop_back();
    if (it->second.empty()) entries_.erase(it);
  } else if (std::holds_alternative<format::ThreadExit>(record.payload)) {
    absl::erase_if(entries_, [&](const auto& e) { return e.first.first == record.tid; });
  }
}

size_t UprobePairer::open_calls() const {
  size_t open = 0;
  for (const auto& [key, stack] : entries_) open += stack.size();
  return open;
}

}  // namespace loupe::session
