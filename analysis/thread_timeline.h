// One exact timeline of states per traced thread, from the scheduler's own
// records: RUNNING from switch-in to switch-out; BLOCKED from a sleeping
// switch-out to the wakeup; RUNNABLE from the wakeup (or from a preempting
// switch-out) to the switch-in. Every nanosecond of a thread is in one state
// once. A blocked interval carries the stacks of its own switch-out (from
// the off_cpu record that follows the switch-in) and what ended it (the
// waker, or the interrupt); a runnable interval carries the threads that
// held its CPU meanwhile, from the switches on that CPU.
#ifndef LOUPE_ANALYSIS_THREAD_TIMELINE_H_
#define LOUPE_ANALYSIS_THREAD_TIMELINE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "analysis/thread_directory.h"
#include "daemon/format/record.h"

namespace loupe::analysis {

// kUnknown intervals are a traced thread's time that no switch in the trace
// places (a switch the kernel did not report and louped could not infer in
// time): emitted so that readers can say how much, never guessed at.
enum class ThreadState : uint8_t { kUnknown, kRunning, kBlocked, kRunnable };

struct Holder {
  uint32_t tid = 0;  // 0: the idle task (the CPU was waking up)
  uint64_t ns = 0;
  // A traced holder's most sampled stack around the wait (StackProfile id), 0 unknown.
  uint32_t doing_stack = 0;
};

// What ended a blocked interval.
struct Wake {
  bool seen = false;  // false: the wakeup is not in the trace
  uint32_t tid = 0;   // the waker; for an interrupt, only the task it interrupted
  format::WakerContext context = format::WakerContext::kTask;
  // What the waker was doing while the woken thread waited: a stack id of
  // its samples or of its own wait (StackProfile ids), 0 unknown.
  uint32_t doing_stack = 0;
  bool doing_off_cpu = false;  // the stack is its own wait: it was off CPU too
  // Off CPU too: the task that ended the waker's own wait, 0 unknown. In a
  // queue for a lock, the waker is the waiter before, woken by the holder.
  uint32_t doing_woken_by = 0;
};

struct StateInterval {
  uint32_t tid = 0;
  ThreadState state = ThreadState::kUnknown;
  uint64_t begin_ns = 0, end_ns = 0;
  uint32_t cpu = 0;  // running: where; runnable: the CPU waited for (where it ran next)
  // Blocked only: the switch-out's state and stacks (StackProfile id, 0 none), and the wake.
  uint32_t prev_state = 0;
  uint32_t stack = 0;
  Wake wake;
  // Runnable only: who had the CPU meanwhile. The sum can fall short of the
  // interval where the trace has no switch to tell (a CPU nobody traced).
  std::span<const Holder> holders;
  // Runnable only: it began when the thread's cgroup had spent its CPU
  // quota, so it waited for the quota to refill (then for a CPU), whoever
  // held the CPU meanwhile (format::kSwitchThrottled).
  bool throttled = false;

  uint64_t ns() const { return end_ns - begin_ns; }
};

class ThreadTimeline {
 public:
  using Sink = std::function<void(const StateInterval&)>;
  // `directory` tells traced threads from foreign ones; it must have seen
  // each record before this timeline does.
  ThreadTimeline(const ThreadDirectory& directory, Sink sink)
      : directory_(directory), sink_(std::move(sink)) {}

  // Where several sessions are read together, before each record (and
  // before anything else reads it): which it is from
  // (format::TraceReader::session). False for another session's record of
  // an event already given (a switch between two sessions' targets, which
  // both record): it is not to be used.
  bool Admit(const format::Record& record, uint32_t session);
  // Every record in time order; `stack` is the StackProfile id of a CPU
  // sample or off-CPU interval.
  void Add(const format::Record& record, uint32_t stack);
  // Told when a thread's records come from a later session than before,
  // once its time in the earlier one has been emitted (to that session's
  // last record): nothing between the two was traced.
  void set_session_left(std::function<void(uint32_t tid)> left) { session_left_ = std::move(left); }
  // A session's records are all read: a thread it took from an earlier
  // session that traced it at the same time goes back to that one.
  void EndSession(uint32_t session) { ended_sessions_.insert(session); }
  // Whether the current record's session is the one that places the
  // thread (the only one that describes it, or, where two traced it at
  // once, the one whose records of it are used): another session's record
  // of it is not counted, for its events would count twice.
  bool SpeaksFor(uint32_t tid) const;
  // Threads whose records came from more than one session ...
  size_t threads_across_sessions() const { return across_sessions_.size(); }
  // ... and those two sessions traced at the same time.
  size_t threads_in_overlapping_sessions() const { return overlapped_.size(); }
  // Emits what a thread's last switch-in is holding back for its evidence.
  void Flush(uint32_t tid);
  // At the end of the trace: every open state, up to `end_ns`.
  void Finish(uint64_t end_ns);

  // The trace lacks the first segments of a session: the threads its
  // segments' preambles describe, when no opening clock_sync follows, were
  // there in a state the trace does not say until their first record
  // (kUnknown from the preamble's time), not in no state at all.
  void set_starts_mid_session(bool mid) { starts_mid_session_ = mid; }

  ThreadState state(uint32_t tid) const;
  uint64_t since(uint32_t tid) const;  // when its current state began
  // True once the trace has shown any context switch.
  bool has_sched_data() const { return sched_seen_; }

 private:
  static constexpr size_t kRecent = 16;
  struct Recent {  // what a thread did lately, to say what a waker was doing
    uint64_t begin_ns = 0, end_ns = 0;
    uint32_t stack = 0;
    uint32_t woken_by = 0;  // a wait's: the task that ended it, 0 none or an interrupt
  };
  using RecentLog = std::array<Recent, kRecent>;
  // An exited thread's recent history, for the wakeups it makes on its way out.
  struct Departed {
    RecentLog recent_samples, recent_waits;
  };
  static constexpr size_t kDepartedKept = 256;
  struct Track {
    ThreadState state = ThreadState::kUnknown;
    uint64_t since = 0;
    uint32_t cpu = 0;
    // kUnknown since `gap_since` because a switch is missing (not merely never seen).
    bool in_gap = false;
    uint64_t gap_since = 0;
    // Blocked, then runnable: the blocked part is emitted with the runnable one.
    bool was_blocked = false;
    uint64_t blocked_since = 0;
    uint32_t prev_state = 0;
    Wake wake;
    // Runnable: holders credited up to this time on `cpu`.
    uint64_t credited_until = 0;
    bool throttled = false;
    std::vector<Holder> holders;
    // A wakeup that raced with the switch-out (seen while still running).
    bool racing_wake = false;
    uint64_t racing_wake_ns = 0;
    Wake racing;
    // Intervals that ended at the last switch-in, waiting for its off_cpu record.
    bool awaiting = false;
    // The last switch-out, and the stacks of the wait it began when the
    // trace ends in it (an off_cpu record at the end, with no switch-in).
    uint64_t switched_out_ns = 0;
    uint32_t unended_stack = 0;
    StateInterval pending_blocked, pending_runnable;
    // It existed when recording began (at `start_ns`) and has no record
    // yet: its first one tells its state since then (FromStart).
    bool from_start = false;
    uint64_t start_ns = 0;
    // Its exit record came: it is gone at its last switch (TASK_DEAD),
    // which may follow preemptions on the way out.
    bool exited = false;
    uint64_t exited_ns = 0;
    RecentLog recent_samples{}, recent_waits{};
    uint8_t next_sample = 0, next_wait = 0;
  };
  struct Cpu {
    uint32_t current = 0;  // the thread the last switch seen here went to
    bool current_known = false;  // no switch here can have gone unrecorded since
    std::vector<std::pair<uint32_t, Track*>> waiters;  // traced threads runnable here
  };

  Track* Traced(uint32_t tid);
  // Whether the current record may speak of the thread: not when a later
  // session has it (sessions that overlap). An earlier session's hold on
  // it ends here: its state up to that session's last record, then it is
  // placed afresh by the current one.
  bool InCurrentSession(uint32_t tid);
  // Whether the current session describes the thread (or none does).
  bool Describes(uint32_t tid) const;
  // Whether another session already gave this record (same time, same event).
  bool SeenFromAnotherSession(const format::Record& record);
  // Its state from track.since up to `end_ns`, where the trace or its
  // session stops knowing it.
  void EndTrack(uint32_t tid, Track& track, uint64_t end_ns);
  // Whether the thread's first record is this one and it existed when
  // recording began (its session's trace opens with a clock_sync record
  // right after the preamble that describes it): then the caller knows its
  // state from track.start_ns to now. Asked once.
  bool FromStart(Track& track);
  // The preamble and opening clock_sync of a session (several sessions may
  // be read together): the threads described just before it at its time.
  void OnDescribed(const format::Record& record);
  void OnClockSync(const format::Record& record);
  Cpu& CpuOf(uint32_t cpu);
  void OnSwitch(const format::Record& record, const format::SchedSwitch& change);
  void OnWakeup(const format::Record& record, const format::SchedWakeup& wakeup);
  void OnMigrate(const format::Record& record, const format::SchedMigrate& migrate);
  void OnOffCpu(const format::Record& record, uint32_t stack);
  void OnExit(const format::Record& record);
  void OnExec(const format::Record& record, const format::ProcessExec& exec);
  // The thread ended at `t` (its exit, or an exec that handed its tid
  // over): its running ends there and nothing follows.
  void Gone(uint32_t tid, uint64_t t);
  // A thread is born with `tid` at `t` (a fork, a new task's wakeup).
  void Reborn(uint32_t tid, uint64_t t);
  // A record the thread ran itself; `sample_stack`: a CPU sample's stack id, else 0.
  void OnOwnRecord(const format::Record& record, uint32_t sample_stack);
  // Its wait from its switch-out to `end` (the wakeup, or where the trace
  // stops knowing), with the stacks and the wake known so far.
  static StateInterval Waited(uint32_t tid, const Track& track, uint64_t end);
  // A switch of the thread is missing: from `since` its state is not known.
  void LoseTrack(uint32_t tid, Track& track, uint64_t since);
  // Its state is known again at `t`: the time it was not is one kUnknown interval.
  void EndGap(uint32_t tid, Track& track, uint64_t t);
  // It ran at `t` (a switch-out, or a record of its own) while runnable or
  // blocked: its switch-in is not in the trace.
  void MissedSwitchIn(uint32_t tid, Track& track, uint64_t t);
  void SwitchOut(uint32_t tid, Track& track, uint64_t t, uint32_t cpu, uint32_t prev_state);
  void SwitchIn(uint32_t tid, Track& track, uint64_t t, uint32_t cpu);
  void BecomeRunnable(uint32_t tid, Track& track, uint64_t t, uint32_t cpu, bool throttled);
  void Credit(Track& track, uint32_t holder, uint64_t until);
  void LeaveWaiters(uint32_t tid, uint32_t cpu);
  void Emit(uint32_t tid, Track& track, ThreadState state, uint64_t begin, uint64_t end);
  // Sets wake->doing_stack and doing_off_cpu from a waker's recent history.
  void Doing(const RecentLog& samples, const RecentLog& waits, uint64_t begin, uint64_t end,
             Wake* wake) const;
  // The stack a thread's samples hit most from `slack_ns` before `begin` to `end`, 0 none.
  static uint32_t MostSampled(const RecentLog& samples, uint64_t begin, uint64_t end,
                              uint64_t slack_ns);
  // Sets each traced holder's doing_stack for a run-queue wait from `begin` to `end`.
  void HoldersDoing(std::vector<Holder>& holders, uint64_t begin, uint64_t end) const;
  // What a thread did lately, running or exited; null logs when not known.
  struct History {
    const RecentLog* samples = nullptr;
    const RecentLog* waits = nullptr;
  };
  History HistoryOf(uint32_t tid) const;

  const ThreadDirectory& directory_;
  Sink sink_;
  absl::node_hash_map<uint32_t, Track> threads_;  // nodes: waiters point at them
  absl::flat_hash_map<uint32_t, Departed> departed_;  // the last kDepartedKept exited
  std::deque<uint32_t> departed_order_;
  std::vector<Cpu> cpus_;
  bool sched_seen_ = false;
  uint64_t described_at_ns_ = 0;
  std::vector<uint32_t> described_;  // threads described at described_at_ns_
  bool described_a_process_ = false;  // a segment's preamble, not a new thread alone
  bool starts_mid_session_ = false;
  // Threads a preamble described with no opening clock_sync after it (the
  // session's start is not in the trace): tid -> since when unknown.
  absl::flat_hash_map<uint32_t, uint64_t> unknown_since_;
  // The described threads, once the preamble is over: to unknown_since_.
  void PreambleEnded();
  // Threads that existed when their session began recording, not yet
  // heard from: tid -> when it began.
  absl::flat_hash_map<uint32_t, uint64_t> started_at_;
  absl::flat_hash_set<uint32_t> ever_tracked_;  // a tid's first record comes once
  uint32_t session_ = 0;                  // the current record's
  std::vector<uint64_t> session_last_ns_;  // by session: its last record so far
  absl::flat_hash_map<uint32_t, uint32_t> session_of_;  // tid -> the session it is placed by
  std::function<void(uint32_t tid)> session_left_;
  absl::flat_hash_set<uint32_t> across_sessions_, overlapped_;
  absl::flat_hash_set<uint32_t> ended_sessions_;
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> described_in_;  // tid -> sessions
  // The scheduler records seen at seen_at_ns_, by what they say -> session.
  uint64_t seen_at_ns_ = 0;
  absl::flat_hash_map<uint64_t, uint32_t> seen_;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_THREAD_TIMELINE_H_
