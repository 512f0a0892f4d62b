#include "daemon/session/uprobe_pairer.h"

#include <algorithm>
#include <variant>

#include "daemon/base/overloaded.h"
#include "daemon/probes/probe_plan.h"

namespace loupe::session {

bool UprobePairer::IsCatch(const format::Record& record) {
  const auto* entry = std::get_if<format::UprobeEntry>(&record.payload);
  return entry != nullptr && entry->probe == probes::kExceptionCaughtProbe;
}

void UprobePairer::Observe(format::Record& record, uint64_t user_sp) {
  unwound_.clear();
  if (IsCatch(record)) return Unwind(record, user_sp);
  std::visit(Overloaded{
                 [&](const format::UprobeEntry& entry) { Enter(record, entry.probe, user_sp); },
                 [&](format::UprobeReturn& ret) { Pair(record, ret, user_sp); },
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

void UprobePairer::Enter(const format::Record& record, std::string_view probe, uint64_t sp) {
  std::vector<Entry>& stack = entries_[Key(record.tid, probe.data())];
  // The stack grows down: an open call whose frame is at or below this
  // one's is over, left without a return.
  while (sp != 0 && !stack.empty() && stack.back().sp != 0 && stack.back().sp <= sp) {
    stack.pop_back();
  }
  if (stack.size() < kMaxDepth) stack.push_back({record.time_ns, sp});
}

void UprobePairer::Pair(const format::Record& record, format::UprobeReturn& ret, uint64_t sp) {
  auto it = entries_.find(Key(record.tid, ret.probe.data()));
  if (it == entries_.end()) return;  // entered before tracing began
  std::vector<Entry>& stack = it->second;
  // At its ret the stack pointer is the entry's; past the kernel's return
  // trampoline, 8 more. Calls above it were left by an exception.
  size_t own = stack.size() - 1;
  if (sp != 0) {
    auto match = std::find_if(stack.rbegin(), stack.rend(), [sp](const Entry& entry) {
      return entry.sp == sp || entry.sp + 8 == sp;
    });
    if (match == stack.rend()) return;  // its call began before tracing
    own = static_cast<size_t>(stack.rend() - match) - 1;
  }
  ret.duration_ns = record.time_ns - stack[own].time_ns;
  stack.resize(own);
  if (stack.empty()) entries_.erase(it);
}

void UprobePairer::Unwind(const format::Record& record, uint64_t sp) {
  if (sp == 0) return;
  // __cxa_begin_catch is called from the catching frame: a call made from
  // that frame has the same stack pointer at its entry, deeper ones lower.
  // Calls still running around the catch have theirs above it.
  unwinding_.clear();
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto& [key, stack] = *it;
    if (key.first != record.tid) {
      ++it;
      continue;
    }
    while (!stack.empty() && stack.back().sp != 0 && stack.back().sp <= sp) {
      unwinding_.push_back({stack.back().sp, format::UprobeReturn{.probe = key.second,
                                                                  .duration_ns = record.time_ns - stack.back().time_ns,
                                                                  .unwound = true}});
      stack.pop_back();
    }
    if (stack.empty()) {
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
  std::sort(unwinding_.begin(), unwinding_.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  for (auto& [entry_sp, ret] : unwinding_) unwound_.push_back(ret);
}

size_t UprobePairer::open_calls() const {
  size_t open = 0;
  for (const auto& [key, stack] : entries_) open += stack.size();
  return open;
}

}  // namespace loupe::session
