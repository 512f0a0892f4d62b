#include "daemon/session/offcpu_tracker.h"

#include <algorithm>
#include <span>
#include <variant>

#include "daemon/base/overloaded.h"
#include "daemon/session/made_on_cpu.h"

namespace loupe::session {

bool OffCpuTracker::Observe(OwnedEvent& event, OwnedEvent* interval) {
  const format::Record& record = event.record;
  bool made = false;
  // A thread making a record of its own is running: a wait still open
  // ended at a switch-in the tracepoint did not report and that could not
  // be placed (MissedSwitchIns: no later switch-out of the thread, as in a
  // process dropped at an exec, or one placed too late for the reorder
  // window). It ends here at the latest, not when the trace does.
  if (MadeOnCpu(record)) {
    const uint32_t maker = MakerOf(record);
    if (auto out = switched_out_.find(maker); out != switched_out_.end() && out->second.active &&
                                              !out->second.exited &&
                                              !InItsSwitch(record, out->second)) {
      made = End(maker, out->second, record.time_ns, record.cpu, interval);
      woken_.erase(maker);
    }
  }
  std::visit(Overloaded{
                 [&](const format::SchedWakeup& wakeup) {
                   // A new thread with an exited one's tid, whose last switch was lost.
                   if (auto reused = switched_out_.find(wakeup.woken_tid);
                       wakeup.is_new && reused != switched_out_.end() && reused->second.exited) {
                     switched_out_.erase(reused);
                   }
                   if (is_target_(event.next_tgid)) {
                     woken_[wakeup.woken_tid] = {record.time_ns, record.tid};
                   }
                 },
                 [&](const format::ThreadExit&) {
                   // Until its last switch (TASK_DEAD), which ends it.
                   switched_out_[record.tid] = {.exited = true};
                   woken_.erase(record.tid);
                 },
                 [&](const format::SchedSwitch& change) { made = OnSwitch(event, change, interval); },
                 // Not scheduling.
                 [](const format::ClockSync&) {}, [](const format::ProcessInfo&) {},
                 [](const format::ThreadInfo&) {}, [](const format::ProcessFork&) {},
                 [](const format::ProcessExec&) {}, [](const format::SchedMigrate&) {},
                 [&](const format::CpuSample&) {
                   if (is_target_(event.prev_tgid)) switched_out_.try_emplace(record.tid);
                 },
                 [](const format::OffCpu&) {},
                 [](const format::UprobeEntry&) {}, [](const format::UprobeReturn&) {},
                 [](const format::UsdtEvent&) {}, [](const format::SpanBegin&) {},
                 [](const format::SpanEnd&) {}, [](const format::Instant&) {},
                 [](const format::Counter&) {}, [](const format::OperationBegin&) {},
                 [](const format::OperationEnd&) {}, [](const format::Loss&) {}},
             record.payload);
  return made;
}

// A sample by a non-maskable interrupt (cycles) can come inside the switch
// itself, after its record was stamped and before the next thread runs:
// the thread is still current there, though switched out. (A sleep read
// at the start had no switch.)
bool OffCpuTracker::InItsSwitch(const format::Record& record, const SwitchedOut& out) {
  return !out.read_at_start && std::holds_alternative<format::CpuSample>(record.payload) &&
         record.cpu == out.cpu &&
         record.time_ns - out.time_ns < kSwitchWindowNs;
}

bool OffCpuTracker::OnSwitch(OwnedEvent& event, const format::SchedSwitch& change,
                             OwnedEvent* interval) {
  const format::Record& record = event.record;
  bool made = false;
  if (is_target_(event.next_tgid)) {
    auto out = switched_out_.find(change.next_tid);
    if (out == switched_out_.end()) {
      switched_out_.try_emplace(change.next_tid);
    } else if (out->second.active) {
      made = End(change.next_tid, out->second, record.time_ns, record.cpu, interval);
    }
    woken_.erase(change.next_tid);
  }
  if ((change.prev_state & format::kTaskDead) != 0) {
    // Its last switch: the thread has exited (its exit event came before),
    // whether or not its process still counts as a target (its last thread
    // may have exited meanwhile). Kept, its entry would stay for the
    // session and give a thread that reuses the tid an interval reaching
    // back to this one.
    switched_out_.erase(record.tid);
    woken_.erase(record.tid);
    return made;
  }
  if (is_target_(event.prev_tgid)) {
    SwitchedOut& out = switched_out_[record.tid];
    out.active = true;
    out.time_ns = record.time_ns;
    out.state = change.prev_state;
    out.tgid = event.prev_tgid;
    out.cpu = record.cpu;
    out.read_at_start = false;
    out.read_ns = 0;
    out.user_depth = event.user_depth;
    // Frames a signal interrupted are where the code was: symbolized as
    // they are, not as return addresses (rare; copied into a kept buffer).
    const std::span<const uint16_t> exact = event.exact_frames();
    out.exact_frames.assign(exact.begin(), exact.end());
    // Swapped, not moved: the event's slot gets a buffer back for its next stack.
    out.frames.swap(event.frames);
    event.frames.clear();
    event.user_depth = 0;
  }
  return made;
}

bool OffCpuTracker::TakeUnended(uint64_t end_ns, OwnedEvent* interval) {
  // Listed once: a scan of every thread per call is quadratic in a big pool.
  if (!unended_listed_) {
    for (const auto& [tid, from] : switched_out_) {
      if (from.active && !from.exited) unended_.push_back(tid);
    }
    unended_listed_ = true;
  }
  while (!unended_.empty()) {
    const uint32_t tid = unended_.back();
    unended_.pop_back();
    auto it = switched_out_.find(tid);
    if (it == switched_out_.end() || !it->second.active || it->second.exited ||
        it->second.time_ns > end_ns) {
      continue;
    }
    const bool ended = End(tid, it->second, end_ns, it->second.cpu, interval);
    woken_.erase(tid);
    if (ended) return true;
  }
  return false;
}

void OffCpuTracker::AsleepAtStart(uint32_t tid, uint32_t tgid, uint32_t state, uint64_t since_ns,
                                  uint64_t read_ns, OwnedEvent& stack) {
  SwitchedOut& out = switched_out_[tid];
  out = {.active = true,
         .time_ns = since_ns,
         .state = state,
         .tgid = tgid,
         .user_depth = stack.user_depth,
         .read_at_start = true,
         .read_ns = read_ns};
  const std::span<const uint16_t> exact = stack.exact_frames();
  out.exact_frames.assign(exact.begin(), exact.end());
  out.frames.swap(stack.frames);
}

bool OffCpuTracker::End(uint32_t tid, SwitchedOut& from, uint64_t end_ns, uint32_t cpu,
                        OwnedEvent* interval) {
  const bool left_before_its_read = end_ns < from.read_ns;
  from.read_at_start = false;
  from.read_ns = 0;
  if (left_before_its_read) {
    from.active = false;
    return false;
  }
  format::OffCpu off{.duration_ns = end_ns - from.time_ns, .prev_state = from.state};
  // Every wakeup kept came after the thread's last switch-in: a switch-in
  // drops those it follows.
  if (auto woken = woken_.find(tid); woken != woken_.end()) {
    // A waker that raced with the switch-out woke a thread still on the
    // CPU: it is runnable from the switch-out.
    off.runq_ns = end_ns - std::max(woken->second.time_ns, from.time_ns);
    off.waker_tid = woken->second.waker_tid;
  } else if (format::TaskState(from.state) == 0) {  // preempted: runnable all along
    off.runq_ns = off.duration_ns;
  }
  interval->Clear();
  interval->record = {.time_ns = end_ns, .tid = tid, .cpu = cpu, .payload = off};
  interval->prev_tgid = from.tgid;  // the interval's process, for symbols
  interval->frames.swap(from.frames);
  interval->user_depth = from.user_depth;
  if (!from.exact_frames.empty()) {
    interval->extras().exact_frames.assign(from.exact_frames.begin(), from.exact_frames.end());
  }
  from.active = false;
  return true;
}

}  // namespace loupe::session
