#include "daemon/session/missed_wakeups.h"

namespace loupe::session {

bool MissedWakeups::Observe(const OwnedEvent& event, uint64_t switched_in_unreported_ns) {
  const format::Record& record = event.record;
  if (const auto* wakeup = std::get_if<format::SchedWakeup>(&record.payload)) {
    if (!is_target_(event.next_tgid)) return false;
    if (wakeup->is_new) {
      Forget(wakeup->woken_tid);  // a new thread, maybe with an old one's tid
      return false;
    }
    // A sleep already woken, or none open: the wakeup is of the sleep the
    // thread is about to begin (it raced with that switch-out).
    auto sleep = sleeps_.find(wakeup->woken_tid);
    if (sleep == sleeps_.end() || sleep->second.in_ns != 0 || sleep->second.woken) {
      woken_running_.insert(wakeup->woken_tid);
    } else {
      sleep->second.woken = true;
    }
    return false;
  }
  if (std::holds_alternative<format::ThreadExit>(record.payload)) {
    Forget(record.tid);
    return false;
  }
  if (const auto* exec = std::get_if<format::ProcessExec>(&record.payload)) {
    Forget(exec->old_tid);  // it takes the main thread's tid
    Forget(record.tid);
    return false;
  }
  const auto* change = std::get_if<format::SchedSwitch>(&record.payload);
  if (change == nullptr) return false;
  if (is_target_(event.next_tgid)) {
    if (auto sleep = sleeps_.find(change->next_tid);
        sleep != sleeps_.end() && sleep->second.in_ns == 0) {
      sleep->second.in_ns = record.time_ns;
      sleep->second.in_cpu = record.cpu;
    }
  }
  if (!is_target_(event.prev_tgid)) return false;
  bool made = false;
  if (auto sleep = sleeps_.find(record.tid); sleep != sleeps_.end()) {
    Sleep& was = sleep->second;
    if (was.in_ns == 0 && switched_in_unreported_ns > was.out_ns) {
      was.in_ns = switched_in_unreported_ns;
      was.in_cpu = record.cpu;
    }
    // Modulo 2^32: the count's low bits, of a wait shorter than 4.29 s.
    const uint32_t queued = event.prev_run_delay_ns - was.run_delay_ns;
    // Its last arrival, by the scheduler's clock: one after the switch-in
    // seen means records were lost between, and the count holds two waits.
    const bool arrived_then = event.prev_ran_ns == 0 ||
                              record.time_ns - event.prev_ran_ns <= was.in_ns + kArrivalSlackNs;
    if (!was.woken && was.in_ns != 0 && arrived_then && queued != 0 &&
        queued < was.in_ns - was.out_ns) {
      inferred_ = {.time_ns = was.in_ns - queued,
                   .tid = record.tid,
                   .tgid = was.tgid,
                   .cpu = was.in_cpu};
      made = true;
    }
    sleeps_.erase(sleep);
  }
  const bool woken_running = woken_running_.erase(record.tid) != 0;
  // Preempted, it waits queued from its switch-out, with no wakeup; a
  // thread that exited may have its tid reused; without the kernel's count
  // nothing can be placed.
  if (format::TaskState(change->prev_state) != 0 &&
      (change->prev_state & format::kTaskDead) == 0 && event.prev_run_delay_ns != 0) {
    sleeps_[record.tid] = {.out_ns = record.time_ns,
                           .tgid = event.prev_tgid,
                           .run_delay_ns = event.prev_run_delay_ns,
                           .woken = woken_running};
  }
  return made;
}

void MissedWakeups::Forget(uint32_t tid) {
  sleeps_.erase(tid);
  woken_running_.erase(tid);
}

void MissedWakeups::TakeInferred(OwnedEvent* event) const {
  event->Clear();
  event->record = {.time_ns = inferred_.time_ns,
                   .tid = 0,
                   .cpu = inferred_.cpu,
                   .payload = format::SchedWakeup{.woken_tid = inferred_.tid,
                                                  .target_cpu = inferred_.cpu,
                                                  .context = format::WakerContext::kUnreported}};
  event->next_tgid = inferred_.tgid;
}

}  // namespace loupe::session
