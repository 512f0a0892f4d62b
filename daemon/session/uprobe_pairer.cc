#include "daemon/session/uprobe_pairer.h"

#include <algorithm>
#include <variant>

#include "daemon/base/overloaded.h"
#include "daemon/probes/probe_plan.h"

namespace loupe::session {

namespace {

format::Unwound CaughtBy(const format::Record& record) {
  const auto* entry = std::get_if<format::UprobeEntry>(&record.payload);
  if (entry == nullptr) return format::Unwound::kNo;
  if (entry->probe == probes::kExceptionCaughtProbe) return format::Unwound::kByException;
  if (entry->probe == probes::kLongjmpProbe) return format::Unwound::kByLongjmp;
  return format::Unwound::kNo;
}

}  // namespace

bool UprobePairer::IsCatch(const format::Record& record) {
  return CaughtBy(record) != format::Unwound::kNo;
}

void UprobePairer::Observe(format::Record& record, uint64_t user_sp,
                           std::span<const int64_t> values) {
  unwound_.clear();
  if (const format::Unwound by = CaughtBy(record); by != format::Unwound::kNo) {
    const bool bounded = values.size() >= 2;
    // A longjmp's stack pointer is the one it lands on, in the frame that
    // called setjmp: a call from that frame has its return address below it.
    const uint64_t sp = by == format::Unwound::kByLongjmp && user_sp != 0 ? user_sp - 8 : user_sp;
    return Unwind(record, sp, bounded ? static_cast<uint64_t>(values[0]) : 0,
                  bounded ? static_cast<uint64_t>(values[1]) : 0, by);
  }
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

namespace {

// Whether an open call entered at `deeper` is below a frame at `sp` on the
// same stack. A thread may run on other stacks too (fibers, a signal's
// alternate stack), mapped elsewhere: calls open there are not over. The
// frames between two calls on one stack span far less than this.
constexpr uint64_t kSameStackSpan = 1 << 20;
bool DeeperOnTheSameStack(uint64_t deeper, uint64_t sp) {
  return deeper != 0 && sp != 0 && deeper <= sp && sp - deeper < kSameStackSpan;
}

}  // namespace

void UprobePairer::Enter(const format::Record& record, std::string_view probe, uint64_t sp) {
  if (!returning_.empty() && !returning_.contains(probe.data())) return;
  std::vector<Entry>& stack = entries_[Key(record.tid, probe.data())];
  // The stack grows down: an open call whose frame is at or below this
  // one's is over, left without a return.
  while (!stack.empty() && DeeperOnTheSameStack(stack.back().sp, sp)) stack.pop_back();
  // Full (calls left open on other stacks, or a deep recursion): the oldest goes.
  if (stack.size() >= kMaxDepth) stack.erase(stack.begin());
  stack.push_back({record.time_ns, sp});
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
  // Calls entered after it, deeper on its stack, were left without a
  // return (a longjmp); those open on another stack go on.
  const uint64_t own_sp = stack[own].sp;
  const auto left = std::remove_if(stack.begin() + static_cast<ptrdiff_t>(own) + 1, stack.end(),
                                   [&](const Entry& entry) {
                                     return DeeperOnTheSameStack(entry.sp, own_sp);
                                   });
  stack.erase(left, stack.end());
  stack.erase(stack.begin() + static_cast<ptrdiff_t>(own));
  if (stack.empty()) entries_.erase(it);
}

void UprobePairer::Unwind(const format::Record& record, uint64_t sp, uint64_t stack_start,
                          uint64_t stack_end, format::Unwound by) {
  if (sp == 0) return;
  // __cxa_begin_catch is called from the catching frame: a call made from
  // that frame has the same stack pointer at its entry, deeper ones lower.
  // Calls still running around the catch have theirs above it. Calls open
  // on another stack of the thread (a fiber's, a signal's alternate stack)
  // are not this exception's, wherever that stack lies.
  const auto unwound = [&](uint64_t entry_sp) {
    if (stack_end == 0) return DeeperOnTheSameStack(entry_sp, sp);
    return entry_sp != 0 && entry_sp <= sp && entry_sp >= stack_start && entry_sp < stack_end;
  };
  unwinding_.clear();
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->first.first != record.tid) {
      ++it;
      continue;
    }
    const char* probe = it->first.second;
    std::vector<Entry>& stack = it->second;
    const auto left = std::remove_if(stack.begin(), stack.end(), [&](const Entry& entry) {
      if (!unwound(entry.sp)) return false;
      unwinding_.push_back({entry.sp, format::UprobeReturn{.probe = probe,
                                                           .duration_ns = record.time_ns - entry.time_ns,
                                                           .unwound = by}});
      return true;
    });
    stack.erase(left, stack.end());
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
