#include "daemon/session/missed_switch_ins.h"

#include <algorithm>

#include "daemon/session/made_on_cpu.h"

namespace loupe::session {

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
  // An exec by a thread switched in unreported: if its process is dropped
  // there (it gained rights the caller lacks), no later switch-out of it is
  // recorded, and its wait would last until the trace ends. The exec says
  // how long the thread had run by then; where it cannot (the run queue's
  // clock not brought up to date since), at least it ran before its exec.
  if (const auto* exec = std::get_if<format::ProcessExec>(&record.payload)) {
    if (is_target_(exec->pid) &&
        InferSwitchIn(record.time_ns, record.cpu, {.tid = exec->old_tid, .tgid = exec->pid},
                      std::max<uint32_t>(event.prev_ran_ns, 1))) {
      switched_out_.erase(exec->old_tid);
      OnCpuOf(record.cpu) = {.tid = record.tid, .tgid = exec->pid};
      return true;
    }
  }
  const auto* change = std::get_if<format::SchedSwitch>(&record.payload);
  if (change == nullptr) {
    if (MadeOnCpu(record)) {
      if (auto out = switched_out_.find(MakerOf(record)); out != switched_out_.end()) {
        out->second.first_run_ns = std::min(out->second.first_run_ns, record.time_ns);
      }
    }
    return false;
  }
  bool made = false;
  if (is_target_(event.prev_tgid)) {
    made = InferSwitchIn(record.time_ns, record.cpu, {.tid = record.tid, .tgid = event.prev_tgid},
                         event.prev_ran_ns);
    if ((change->prev_state & format::kTaskDead) != 0) {
      switched_out_.erase(record.tid);  // exited: its tid may come back as another thread
    } else {
      switched_out_[record.tid] = {.time_ns = record.time_ns};
    }
  }
  if (is_target_(event.next_tgid)) switched_out_.erase(change->next_tid);
  OnCpuOf(record.cpu) = {change->next_tid, event.next_tgid, event.next_comm};
  return made;
}

bool MissedSwitchIns::InferSwitchIn(uint64_t time_ns, uint32_t cpu, OnCpu thread, uint32_t ran_ns) {
  auto out = switched_out_.find(thread.tid);
  const OnCpu& last_on_cpu = OnCpuOf(cpu);
  // Only from a thread that is not a target: a target's own switches are
  // all reported, and it cannot have handed over a CPU it was not on.
  if (out == switched_out_.end() || ran_ns == 0 || time_ns - out->second.time_ns <= ran_ns ||
      is_target_(last_on_cpu.tgid)) {
    return false;
  }
  // The two clocks agree to a few microseconds: never after what it ran,
  // nor at the same time — equal times leave the reorder buffer in arrival
  // order, which would put that record before its switch-in and the wait
  // before it inside whatever the record began.
  const uint64_t before_first_run =
      out->second.first_run_ns == UINT64_MAX ? UINT64_MAX : out->second.first_run_ns - 1;
  inferred_ = {.time_ns = std::min(time_ns - ran_ns, before_first_run),
               .cpu = cpu,
               .from = last_on_cpu,
               .to = thread};
  return true;
}

MissedSwitchIns::OnCpu& MissedSwitchIns::OnCpuOf(uint32_t cpu) {
  if (cpu >= on_cpu_.size()) on_cpu_.resize(cpu + 1);
  return on_cpu_[cpu];
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
