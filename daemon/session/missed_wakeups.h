// Wakeups the kernel never reported. On the Firecracker guests Loupe is
// tested on, a target that switched out asleep to a thread of the guest's
// agent can come back with neither its wakeup nor its switch-in in the
// trace (docs/report.md, "Known limits"): its whole wait would read as
// blocked, none of it queued. The kernel's count of the thread's time
// queued (sched_info.run_delay, in each switch-out:
// loupe_sched_switch.prev_run_delay_ns) says how long: from the switch-out
// that began the sleep to the thread's next switch-out it was queued only
// while waiting for the switch-in between, which it then ran from. The
// wakeup is made that long before the switch-in, its waker unknown
// (format::WakerContext::kUnreported).
#ifndef LOUPE_DAEMON_SESSION_MISSED_WAKEUPS_H_
#define LOUPE_DAEMON_SESSION_MISSED_WAKEUPS_H_

#include <cstdint>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "daemon/session/owned_event.h"

namespace loupe::session {

class MissedWakeups {
 public:
  using IsTarget = std::function<bool(uint32_t tgid)>;
  explicit MissedWakeups(IsTarget is_target) : is_target_(std::move(is_target)) {}

  // Every event, in the order drained (one ring: a wakeup comes before the
  // switch-in it allows). `switched_in_unreported_ns`: MissedSwitchIns
  // placed the switch-in of the thread `event` switches out at that time,
  // on its CPU. True when `event` switches a target out after a sleep whose
  // wakeup the trace lacks: the wakeup, at inferred_time_ns(), is then to
  // be taken with TakeInferred.
  bool Observe(const OwnedEvent& event, uint64_t switched_in_unreported_ns);
  uint64_t inferred_time_ns() const { return inferred_.time_ns; }
  void TakeInferred(OwnedEvent* event) const;
  size_t threads() const { return sleeps_.size() + woken_running_.size(); }

 private:
  struct Sleep {
    uint64_t out_ns = 0;
    uint64_t in_ns = 0;  // its switch-in, 0 before
    uint32_t in_cpu = 0;
    uint32_t tgid = 0;
    uint32_t run_delay_ns = 0;  // at the switch-out
    bool woken = false;         // its wakeup is in the trace
  };
  struct Inferred {
    uint64_t time_ns = 0;
    uint32_t tid = 0, tgid = 0, cpu = 0;
  };

  // The scheduler's clock and the records' agree to a few microseconds.
  static constexpr uint64_t kArrivalSlackNs = 100'000;
  void Forget(uint32_t tid);

  IsTarget is_target_;
  // Targets that switched out asleep, by tid, until their next switch-out.
  absl::flat_hash_map<uint32_t, Sleep> sleeps_;
  // Targets woken while still running: a waker that raced with the switch-out
  // it then ends, recorded before it.
  absl::flat_hash_set<uint32_t> woken_running_;
  Inferred inferred_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_MISSED_WAKEUPS_H_
