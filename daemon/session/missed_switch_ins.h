// Switch-ins the kernel never reported. The sched_switch tracepoint does
// not fire for some switches (on a 6.18 guest: none away from its init's
// threads), so a target preempted by such a thread switches out again with
// no switch-in between, and its time in between would be unaccounted. Its
// second switch-out says, from the scheduler's own accounting, how long it
// had run (loupe_sched_switch.prev_ran_ns): the missing switch-in is made
// at that time, from the thread the CPU was last seen to switch to, and
// marked inferred (format::kSwitchInferred in its prev_state). An exec
// says the same of the thread that called it (loupe_process_exec.ran_ns).
#ifndef LOUPE_DAEMON_SESSION_MISSED_SWITCH_INS_H_
#define LOUPE_DAEMON_SESSION_MISSED_SWITCH_INS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/session/owned_event.h"

namespace loupe::session {

class MissedSwitchIns {
 public:
  using IsTarget = std::function<bool(uint32_t tgid)>;
  explicit MissedSwitchIns(IsTarget is_target) : is_target_(std::move(is_target)) {}

  // Every event, in the order drained (a thread's own records are in order
  // there). True when `event` switches a target out a second time, or is
  // its exec, with no switch-in since: the missing switch-in, at inferred_time_ns() (before
  // `event`'s, and strictly before any record the thread ran meanwhile), is then to
  // be taken with TakeInferred.
  bool Observe(const OwnedEvent& event);
  uint64_t inferred_time_ns() const { return inferred_.time_ns; }
  void TakeInferred(OwnedEvent* event) const;
  size_t switched_out_threads() const { return switched_out_.size(); }

 private:
  struct OnCpu {
    uint32_t tid = 0, tgid = 0;
    TaskComm comm;
  };
  struct Inferred {
    uint64_t time_ns = 0;
    uint32_t cpu = 0;
    OnCpu from, to;
  };
  // Whether `thread`, on `cpu` at `time_ns` having run `ran_ns` there, was
  // switched in unreported; if so, the switch-in is made (inferred_).
  bool InferSwitchIn(uint64_t time_ns, uint32_t cpu, OnCpu thread, uint32_t ran_ns);
  OnCpu& OnCpuOf(uint32_t cpu);

  IsTarget is_target_;
  Inferred inferred_;
  struct SwitchedOut {
    uint64_t time_ns = 0;
    uint64_t first_run_ns = UINT64_MAX;  // its first own record since: it ran by then
  };
  // Targets switched out (or new, from their wakeup) and not seen switched in since, by tid.
  absl::flat_hash_map<uint32_t, SwitchedOut> switched_out_;
  std::vector<OnCpu> on_cpu_;  // by CPU: the thread last switched to
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_MISSED_SWITCH_INS_H_
