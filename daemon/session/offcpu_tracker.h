// Derives off-CPU intervals from the time-ordered switch and wakeup stream:
// a target thread's switch-out (with its stacks and state) paired with its
// next switch-in, and the run-queue wait from its wakeup (or, when it was
// preempted or woken before it was even off the CPU, from its switch-out)
// to that switch-in.
#ifndef LOUPE_DAEMON_SESSION_OFFCPU_TRACKER_H_
#define LOUPE_DAEMON_SESSION_OFFCPU_TRACKER_H_

#include <cstdint>
#include <functional>
#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/session/owned_event.h"

namespace loupe::session {

class OffCpuTracker {
 public:
  using IsTarget = std::function<bool(uint32_t tgid)>;
  explicit OffCpuTracker(IsTarget is_target) : is_target_(std::move(is_target)) {}

  // Feed every event in time order. For a switch-in that ends an off-CPU
  // interval (or a record the thread made itself, where the kernel did not
  // report its switch-in), fills `interval` with the off_cpu event to
  // write after it and returns true. Takes the switch-out stacks out of `event` (a
  // sched_switch record carries none); buffers are swapped, never freed, so
  // a busy session allocates nothing here once each thread has been seen.
  bool Observe(OwnedEvent& event, OwnedEvent* interval);
  // A thread found asleep right after recording began, at `since_ns`, with
  // `stack`'s frames (taken) as its switch-out would have them: the sleep
  // its first switch-in ends, if that comes after `read_ns`, when it was
  // read. One before means it ran meanwhile (a sleep of its own since, read
  // instead, has its switch-out in the trace): then no interval.
  void AsleepAtStart(uint32_t tid, uint32_t tgid, uint32_t state, uint64_t since_ns,
                     uint64_t read_ns, OwnedEvent& stack);
  // When tracing stops: a thread still off the CPU has its wait so far,
  // up to `end_ns`, with the stacks of its switch-out (only an off_cpu
  // record carries them). Fills `interval` with one such record and
  // returns true while any is left; its time is `end_ns`, at which the
  // thread has no switch-in, which is how readers tell it was still waiting.
  bool TakeUnended(uint64_t end_ns, OwnedEvent* interval);
  // Threads between a switch-out and their switch-in.
  size_t tracked_threads() const {
    return static_cast<size_t>(std::ranges::count_if(
        switched_out_, [](const auto& entry) { return entry.second.active; }));
  }
  // Whether a living thread switched, or was sampled running, while traced.
  bool Seen(uint32_t tid) const { return switched_out_.contains(tid); }
  // Threads with an entry (and its stack buffer): those alive that have
  // switched or been sampled, so memory follows living threads.
  size_t kept_threads() const { return switched_out_.size(); }

 private:
  // Kept after the switch-in (inactive) until the thread exits: its frames
  // buffer serves the thread's next switch-out. A thread switched in or
  // sampled before any switch-out has an inactive one: it was seen.
  struct SwitchedOut {
    bool active = false;
    // Its exit record came: preempted on its way out, it is still switched
    // in again, but at the trace's end it waits for nothing.
    bool exited = false;
    uint64_t time_ns = 0;
    uint32_t state = 0;
    uint32_t tgid = 0;
    uint32_t cpu = 0;
    std::vector<uint64_t> frames;
    std::vector<uint16_t> exact_frames;  // user frames (by index) a signal interrupted
    uint16_t user_depth = 0;
    // A sleep read at the start (AsleepAtStart), not a switch-out: no
    // switch-in before read_ns ends it.
    bool read_at_start = false;
    uint64_t read_ns = 0;
  };
  struct Woken {
    uint64_t time_ns = 0;
    uint32_t waker_tid = 0;
  };

  // A switch: ends the next thread's off-CPU interval (into `interval`),
  // begins the previous one's.
  bool OnSwitch(OwnedEvent& event, const format::SchedSwitch& change, OwnedEvent* interval);
  // Longer than a switch takes, stacks walked and all (~3 us).
  static constexpr uint64_t kSwitchWindowNs = 20'000;
  static bool InItsSwitch(const format::Record& record, const SwitchedOut& out);
  // Ends `tid`'s interval at `end_ns` into `interval` (its entry made
  // inactive) and returns true; false, with no interval, for a sleep read
  // at the start that the thread had left by then.
  bool End(uint32_t tid, SwitchedOut& from, uint64_t end_ns, uint32_t cpu, OwnedEvent* interval);

  IsTarget is_target_;
  absl::flat_hash_map<uint32_t, SwitchedOut> switched_out_;  // by tid
  std::vector<uint32_t> unended_;  // TakeUnended's threads left to take
  bool unended_listed_ = false;
  absl::flat_hash_map<uint32_t, Woken> woken_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_OFFCPU_TRACKER_H_
