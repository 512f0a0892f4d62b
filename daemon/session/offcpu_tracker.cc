#include "daemon/session/offcpu_tracker.h"

#include <algorithm>
#include <variant>

#include "daemon/base/overloaded.h"

namespace loupe::session {

std::optional<OwnedEvent> OffCpuTracker::Observe(OwnedEvent& event) {
  const format::Record& record = event.record;
  std::optional<OwnedEvent> interval;
  std::visit(Overloaded{
                 [&](const format::SchedWakeup& wakeup) {
                   if (is_target_(event.next_tgid)) {
                     woken_[wakeup.woken_tid] = {record.time_ns, record.tid};
                   }
                 },
                 [&](const format::ThreadExit&) {
                   switched_out_.erase(record.tid);
                   woken_.erase(record.tid);
                 },
                 [&](const format::SchedSwitch& change) { interval = OnSwitch(event, change); },
                 // Not scheduling.
                 [](const format::ClockSync&) {}, [](const format::ProcessInfo&) {},
                 [](const format::ThreadInfo&) {}, [](const format::ProcessFork&) {},
                 [](const format::ProcessExec&) {}, [](const format::SchedMigrate&) {},
                 [](const format::CpuSample&) {}, [](const format::OffCpu&) {},
                 [](const format::UprobeEntry&) {}, [](const format::UprobeReturn&) {},
                 [](const format::UsdtEvent&) {}, [](const format::SpanBegin&) {},
                 [](const format::SpanEnd&) {}, [](const format::Instant&) {},
                 [](const format::Counter&) {}, [](const format::OperationBegin&) {},
                 [](const format::OperationEnd&) {}, [](const format::Loss&) {}},
             record.payload);
  return interval;
}

std::optional<OwnedEvent> OffCpuTracker::OnSwitch(OwnedEvent& event,
                                                  const format::SchedSwitch& change) {
  const format::Record& record = event.record;
  std::optional<OwnedEvent> interval;
  if (is_target_(event.next_tgid)) {
    // Every wakeup kept here came after the thread's last switch-in: older
    // ones are dropped below, at the switch-in they predate.
    auto woken = woken_.find(change.next_tid);
    auto out = switched_out_.find(change.next_tid);
    if (out != switched_out_.end()) {
      const SwitchedOut& from = out->second;
      format::OffCpu off{.duration_ns = record.time_ns - from.time_ns, .prev_state = from.state};
      if (woken != woken_.end()) {
        // A waker that raced with the switch-out woke a thread still on the
        // CPU: it is runnable from the switch-out.
        off.runq_ns = record.time_ns - std::max(woken->second.time_ns, from.time_ns);
        off.waker_tid = woken->second.waker_tid;
      } else if (from.state == 0) {  // preempted: runnable all along
        off.runq_ns = off.duration_ns;
      }
      OwnedEvent made;
      made.record = {
          .time_ns = record.time_ns, .tid = change.next_tid, .cpu = record.cpu, .payload = off};
      made.prev_tgid = event.next_tgid;  // the interval's process, for symbols
      made.frames = std::move(out->second.frames);
      made.user_depth = out->second.user_depth;
      interval = std::move(made);
      switched_out_.erase(out);
    }
    if (woken != woken_.end()) woken_.erase(woken);
  }
  if (is_target_(event.prev_tgid)) {
    SwitchedOut& out = switched_out_[record.tid];
    out.time_ns = record.time_ns;
    out.state = change.prev_state;
    out.user_depth = event.user_depth;
    // Swapped, not moved: the event's slot gets a buffer back for its next stack.
    out.frames.swap(event.frames);
    event.frames.clear();
    event.user_depth = 0;
  }
  return interval;
}

}  // namespace loupe::session
