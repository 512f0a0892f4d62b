#include "daemon/session/missed_switch_ins.h"

#include <algorithm>

#include "daemon/base/overloaded.h"

namespace loupe::session {
namespace {

// Records a thread makes itself, so it was on a CPU at their time (its
// exit and its exec are reported from the thread itself too).
bool RanIt(const format::Record& record) {
  using namespace format;
  return std::visit(
      Overloaded{[](const CpuSample&) { return true; }, [](const SpanBegin&) { return true; },
                 [](const SpanEnd&) { return true; }, [](const Instant&) { return true; },
                 [](const Counter&) { return true; }, [](const OperationBegin&) { return true; },
                 [](const OperationEnd&) { return true; }, [](const UsdtEvent&) { return true; },
                 [](const UprobeEntry&) { return true; }, [](const UprobeReturn&) { return true; },
                 [](const ClockSync&) { return false; }, [](const ProcessInfo&) { return false; },
                 [](const ThreadInfo&) { return false; }, [](const ProcessFork&) { return false; },
                 [](const ProcessExec&) { return true; }, [](const ThreadExit&) { return true; },
                 [](const SchedSwitch&) { return false; }, [](const SchedWakeup&) { return false; },
                 [](const SchedMigrate&) { return false; }, [](const OffCpu&) { return false; },
                 [](const Loss&) { return false; }},
      record.payload);
}

}  // namespace

bool MissedSwitchIns::Observe(const OwnedEvent& event) {
  const format::Record& record = event.record;
  // A new thread waits to run from its wakeup as a switched-out one does:
  // its first switch-in can be the one the kernel does not report.
  if (const auto* wakeup = std::get_if<format::SchedWakeup>(&record.payload)) {
    if (wakeup->is_new && is_target_(event.next_tgid)) {
      switched_out_[wakeup->woken_tid] = {.time_ns = record.time_ns};
    }
    return false;
  }
  const auto* change = std::get_if<format::SchedSwitch>(&record.payload);
  if (change == nullptr) {
    if (RanIt(record)) {
      if (auto out = switched_out_.find(record.tid); out != switched_out_.end()) {
        out->second.first_run_ns = std::min(out->second.first_run_ns, record.time_ns);
      }
    }
    return false;
  }
  if (record.cpu >= on_cpu_.size()) on_cpu_.resize(record.cpu + 1);
  OnCpu& cpu = on_cpu_[record.cpu];
  bool made = false;
  if (is_target_(event.prev_tgid)) {
    auto out = switched_out_.find(record.tid);
    const uint64_t ran = event.prev_ran_ns;
    // Only from a thread that is not a target: a target's own switches are
    // all reported, and it cannot have handed over a CPU it was not on.
    if (out != switched_out_.end() && ran != 0 && record.time_ns - out->second.time_ns > ran &&
        !is_target_(cpu.tgid)) {
      // The two clocks agree to a few microseconds: never after what it
      // ran, nor at the same time — equal times leave the reorder buffer in
      // arrival order, which would put that record before its switch-in
      // and the wait before it inside whatever the record began.
      const uint64_t before_first_run =
          out->second.first_run_ns == UINT64_MAX ? UINT64_MAX : out->second.first_run_ns - 1;
      inferred_ = {.time_ns = std::min(record.time_ns - ran, before_first_run),
                   .cpu = record.cpu,
                   .from = cpu,
                   .to = {.tid = record.tid, .tgid = event.prev_tgid}};
      made = true;
    }
    if ((change->prev_state & format::kTaskDead) != 0) {
      switched_out_.erase(record.tid);  // exited: its tid may come back as another thread
    } else {
      switched_out_[record.tid] = {.time_ns = record.time_ns};
    }
  }
  if (is_target_(event.next_tgid)) switched_out_.erase(change->next_tid);
  cpu = {change->next_tid, event.next_tgid, event.next_comm};
  return made;
}

void MissedSwitchIns::TakeInferred(OwnedEvent* event) const {
  event->Clear();
  event->record = {.time_ns = inferred_.time_ns,
                   .tid = inferred_.from.tid,
                   .cpu = inferred_.cpu,
                   .payload = format::SchedSwitch{inferred_.to.tid, format::kSwitchInferred}};
  event->prev_tgid = inferred_.from.tgid;
  event->next_tgid = inferred_.to.tgid;
  event->prev_comm = inferred_.from.comm;
}

}  // namespace loupe::session
