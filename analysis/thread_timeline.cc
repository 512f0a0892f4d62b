#include "analysis/thread_timeline.h"

#include <algorithm>
#include <variant>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/hash/hash.h"
#include "daemon/base/overloaded.h"

namespace loupe::analysis {
namespace {

// A wakeup seen while its thread still runs, followed by a sleeping
// switch-out this soon, raced with that switch-out: the thread never
// really slept. (The BPF side drops wakeups of threads still queued, so a
// wakeup of a running thread is this race; the window guards older traces.)
constexpr uint64_t kRaceWindowNs = 1'000'000;
constexpr size_t kMaxCpus = 4096;
// A waker's samples this long before the wait began still say what it was doing.
constexpr uint64_t kDoingSlackNs = 10'000'000;

}  // namespace

ThreadState ThreadTimeline::state(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? ThreadState::kUnknown : it->second.state;
}

uint64_t ThreadTimeline::since(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? 0 : it->second.since;
}

ThreadTimeline::Track* ThreadTimeline::Traced(uint32_t tid) {
  if (!directory_.Traced(tid) || !InCurrentSession(tid)) return nullptr;
  auto [it, inserted] = threads_.try_emplace(tid);
  // A tid seen again after its thread's exit is a new thread, not one the
  // trace's start found.
  if (inserted && ever_tracked_.insert(tid).second) {
    if (auto started = started_at_.find(tid); started != started_at_.end()) {
      it->second.from_start = true;
      it->second.start_ns = started->second;
      started_at_.erase(started);
    } else if (auto unknown = unknown_since_.find(tid); unknown != unknown_since_.end()) {
      it->second.in_gap = true;  // ended by its first record, as a stretch no switch places
      it->second.gap_since = unknown->second;
      unknown_since_.erase(unknown);
    }
  }
  return &it->second;
}

bool ThreadTimeline::Describes(uint32_t tid) const {
  auto it = described_in_.find(tid);
  return it == described_in_.end() || absl::c_linear_search(it->second, session_);
}

bool ThreadTimeline::SpeaksFor(uint32_t tid) const {
  auto it = session_of_.find(tid);
  return it != session_of_.end() ? it->second == session_ : Describes(tid);
}

bool ThreadTimeline::InCurrentSession(uint32_t tid) {
  // A session records the other side of its targets' switches and
  // wakeups too: a thread only another session traces is that one's to
  // place.
  if (!Describes(tid)) return false;
  auto [of, added] = session_of_.try_emplace(tid, session_);
  if (added || of->second == session_) return true;
  if (of->second > session_ && !ended_sessions_.contains(of->second)) {
    // A later session traces it too, at the same time: its view is kept
    // while it lasts.
    overlapped_.insert(tid);
    return false;
  }
  // Its session is over (an earlier one, or a later one that ran out while
  // this one goes on): from here on this one places it.
  const uint32_t earlier = of->second;
  of->second = session_;
  across_sessions_.insert(tid);
  if (auto it = threads_.find(tid); it != threads_.end()) {
    Track& track = it->second;
    Flush(tid);
    EndTrack(tid, track, session_last_ns_[earlier]);
    if (track.state == ThreadState::kRunnable) LeaveWaiters(tid, track.cpu);
    for (Cpu& cpu : cpus_) {
      if (cpu.current == tid) cpu.current_known = false;
    }
    threads_.erase(it);
  }
  // Its first record in this session places it, from this session's start
  // at most.
  ever_tracked_.erase(tid);
  started_at_.erase(tid);
  unknown_since_.erase(tid);
  if (session_left_) session_left_(tid);
  return true;
}

bool ThreadTimeline::SeenFromAnotherSession(const format::Record& record) {
  using namespace format;
  if (session_last_ns_.size() < 2) return false;  // one session so far: nothing twice
  uint64_t key = 0;
  if (const auto* change = std::get_if<SchedSwitch>(&record.payload)) {
    key = absl::HashOf(1, record.cpu, record.tid, change->next_tid, change->prev_state);
  } else if (const auto* wakeup = std::get_if<SchedWakeup>(&record.payload)) {
    key = absl::HashOf(2, record.cpu, record.tid, wakeup->woken_tid);
  } else if (const auto* migrate = std::get_if<SchedMigrate>(&record.payload)) {
    key = absl::HashOf(3, record.tid, migrate->orig_cpu, migrate->dest_cpu);
  } else {
    return false;
  }
  if (record.time_ns != seen_at_ns_) {
    seen_at_ns_ = record.time_ns;
    seen_.clear();
  }
  auto [it, added] = seen_.try_emplace(key, session_);
  return !added && it->second != session_;
}

void ThreadTimeline::PreambleEnded() {
  if (starts_mid_session_ && described_a_process_) {
    for (uint32_t tid : described_) {
      if (!ever_tracked_.contains(tid) && !started_at_.contains(tid)) {
        unknown_since_.emplace(tid, described_at_ns_);
      }
    }
  }
  described_.clear();
  described_a_process_ = false;
}

void ThreadTimeline::OnDescribed(const format::Record& record) {
  std::vector<uint32_t>& sessions = described_in_[record.tid];
  if (!absl::c_linear_search(sessions, session_)) sessions.push_back(session_);
  // Described by a later session's preamble: placed from its start.
  if (directory_.Traced(record.tid) && !InCurrentSession(record.tid)) return;
  if (record.time_ns != described_at_ns_) {
    PreambleEnded();
    described_at_ns_ = record.time_ns;
  }
  described_a_process_ =
      described_a_process_ || std::holds_alternative<format::ProcessInfo>(record.payload);
  described_.push_back(record.tid);
}

void ThreadTimeline::OnClockSync(const format::Record& record) {
  // Only a session's opening one follows its preamble at its own time (a
  // stop has no preamble after it, and a new segment's preamble comes
  // before its first event, which is not a clock_sync).
  if (record.time_ns != described_at_ns_) return;
  for (uint32_t tid : described_) {
    if (!ever_tracked_.contains(tid)) started_at_.emplace(tid, record.time_ns);
  }
  described_.clear();
}

bool ThreadTimeline::FromStart(Track& track) {
  const bool from_start = track.from_start && track.state == ThreadState::kUnknown &&
                          !track.in_gap && sched_seen_;
  track.from_start = false;
  return from_start;
}

ThreadTimeline::Cpu& ThreadTimeline::CpuOf(uint32_t cpu) {
  const size_t index = std::min<size_t>(cpu, kMaxCpus);  // a damaged trace shares the last
  if (index >= cpus_.size()) cpus_.resize(index + 1);
  return cpus_[index];
}

bool ThreadTimeline::Admit(const format::Record& record, uint32_t session) {
  session_ = session;
  if (session >= session_last_ns_.size()) session_last_ns_.resize(session + 1, 0);
  session_last_ns_[session] = std::max(session_last_ns_[session], record.time_ns);
  // Two sessions whose targets meet (one's thread switches to the other's)
  // both record that switch: it happened once.
  return !SeenFromAnotherSession(record);
}

void ThreadTimeline::Add(const format::Record& record, uint32_t stack) {
  using namespace format;
  if (!described_.empty() && !std::holds_alternative<ProcessInfo>(record.payload) &&
      !std::holds_alternative<ThreadInfo>(record.payload) &&
      !std::holds_alternative<ClockSync>(record.payload)) {
    PreambleEnded();
  }
  std::visit(Overloaded{
                 [&](const SchedSwitch& change) { OnSwitch(record, change); },
                 [&](const SchedWakeup& wakeup) { OnWakeup(record, wakeup); },
                 [&](const SchedMigrate& migrate) { OnMigrate(record, migrate); },
                 [&](const OffCpu&) { OnOffCpu(record, stack); },
                 [&](const ThreadExit&) { OnExit(record); },
                 // Records the thread ran itself.
                 [&](const CpuSample&) { OnOwnRecord(record, stack); },
                 [&](const SpanBegin&) { OnOwnRecord(record, 0); },
                 [&](const SpanEnd&) { OnOwnRecord(record, 0); },
                 [&](const Instant&) { OnOwnRecord(record, 0); },
                 [&](const Counter&) { OnOwnRecord(record, 0); },
                 [&](const OperationBegin&) { OnOwnRecord(record, 0); },
                 [&](const OperationEnd&) { OnOwnRecord(record, 0); },
                 [&](const UsdtEvent&) { OnOwnRecord(record, 0); },
                 [&](const UprobeEntry&) { OnOwnRecord(record, 0); },
                 [&](const UprobeReturn&) { OnOwnRecord(record, 0); },
                 // Records about a thread or process, not run by it.
                 [&](const ClockSync&) { OnClockSync(record); },
                 [&](const ProcessInfo&) { OnDescribed(record); },
                 [&](const ThreadInfo& info) {
                   if (!info.foreign) OnDescribed(record);
                 },
                 [&](const ProcessExec& exec) { OnExec(record, exec); },
                 [&](const ProcessFork& fork) { Reborn(fork.child_tid, record.time_ns); },
                 [](const Loss&) {}},
             record.payload);
}

void ThreadTimeline::OnExit(const format::Record& record) {
  OnOwnRecord(record, 0);  // the exit ran in it
  if (Track* track = Traced(record.tid)) {
    track->exited = true;
    track->exited_ns = record.time_ns;
  }
}

void ThreadTimeline::OnExec(const format::Record& record, const format::ProcessExec& exec) {
  // A thread other than the main one called exec: it goes on as the main
  // thread's tid (whose own exit came before), and its old tid is heard of
  // no more. Its running under the old tid ends here.
  if (exec.old_tid != 0 && exec.old_tid != record.tid) Gone(exec.old_tid, record.time_ns);
  OnOwnRecord(record, 0);  // the exec ran in it
}

void ThreadTimeline::Reborn(uint32_t tid, uint64_t t) {
  // A new thread with the tid of one that exited and whose last switch the
  // trace lacks: that one is gone by now.
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.exited) return;
  Track& track = it->second;
  if (track.state != ThreadState::kRunning) {
    // Lost off its CPU after its exit: no wait of a thread that is gone.
    if (track.state == ThreadState::kRunnable) LeaveWaiters(tid, track.cpu);
    track.state = ThreadState::kUnknown;
    track.in_gap = false;
  }
  Gone(tid, t);
}

void ThreadTimeline::Gone(uint32_t tid, uint64_t t) {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  Flush(tid);
  Track& track = it->second;
  // It ran at `t` (its exit record, an exec, its last switch): not runnable or blocked.
  if (track.state == ThreadState::kRunnable || track.state == ThreadState::kBlocked) {
    MissedSwitchIn(tid, track, t);
  }
  EndGap(tid, track, t);
  if (track.state == ThreadState::kRunning) Emit(tid, track, ThreadState::kRunning, track.since, t);
  // Its wakeups on the way out (a joiner's) may come after its exit: what
  // it did lately stays known for them.
  departed_.insert_or_assign(tid, Departed{track.recent_samples, track.recent_waits});
  departed_order_.push_back(tid);
  if (departed_order_.size() > kDepartedKept) {
    departed_.erase(departed_order_.front());
    departed_order_.pop_front();
  }
  threads_.erase(it);
}

void ThreadTimeline::OnOwnRecord(const format::Record& record, uint32_t sample_stack) {
  Track* track = Traced(record.tid);
  if (track == nullptr) return;
  if (sample_stack != 0) {
    track->recent_samples[track->next_sample++ % kRecent] = {record.time_ns, record.time_ns,
                                                             sample_stack};
  }
  // The thread ran this record itself: once switches are being traced, its
  // state is known from here on.
  if (!sched_seen_) return;
  if (track->state == ThreadState::kRunnable || track->state == ThreadState::kBlocked) {
    MissedSwitchIn(record.tid, *track, record.time_ns);
  }
  if (track->state == ThreadState::kUnknown) {
    // Nothing switched it since the start: it has run since then.
    const bool from_start = FromStart(*track);
    EndGap(record.tid, *track, record.time_ns);
    track->state = ThreadState::kRunning;
    track->since = from_start ? track->start_ns : record.time_ns;
    track->cpu = record.cpu;
  }
}

void ThreadTimeline::OnSwitch(const format::Record& record, const format::SchedSwitch& change) {
  sched_seen_ = true;
  const uint64_t t = record.time_ns;
  // The CPU ran a traced thread, yet another one switches out here: the
  // first one's switch-out is missing from the trace. Since when it was off
  // is unknown, so its time from its switch-in on reads as unaccounted.
  if (const Cpu& cpu = CpuOf(record.cpu); cpu.current != record.tid && cpu.current != 0) {
    if (auto lost = threads_.find(cpu.current); lost != threads_.end() &&
                                                lost->second.state == ThreadState::kRunning &&
                                                lost->second.cpu == record.cpu) {
      Flush(cpu.current);
      Track& track = lost->second;
      if (track.exited) {
        // Its last switch went unrecorded: it ran to its exit, and was gone
        // by now, at a time the trace does not tell.
        const uint64_t ran_to = std::max(track.since, track.exited_ns);
        Emit(cpu.current, track, ThreadState::kRunning, track.since, ran_to);
        LoseTrack(cpu.current, track, ran_to);
        Gone(cpu.current, record.time_ns);
      } else {
        LoseTrack(cpu.current, track, track.since);
      }
    }
  }
  // Whoever switched out had this CPU until now: every thread waiting here waited for it.
  for (const auto& [waiter, track] : CpuOf(record.cpu).waiters) Credit(*track, record.tid, t);
  if ((change.prev_state & format::kTaskDead) != 0) {
    // The exited thread's last switch (its exit record came just before):
    // a thread that no longer exists waits for nothing.
    Gone(record.tid, t);
  } else if (Track* prev = Traced(record.tid)) {
    SwitchOut(record.tid, *prev, t, record.cpu, change.prev_state);
  }
  if (Track* next = Traced(change.next_tid)) SwitchIn(change.next_tid, *next, t, record.cpu);
  Cpu& cpu = CpuOf(record.cpu);
  cpu.current = change.next_tid;
  // Switches away from an untraced thread are recorded only while a traced one waits here.
  cpu.current_known = directory_.Traced(change.next_tid) || !cpu.waiters.empty();
}

void ThreadTimeline::SwitchOut(uint32_t tid, Track& track, uint64_t t, uint32_t cpu,
                               uint32_t prev_state) {
  if (FromStart(track)) {  // on this CPU since the start
    track.state = ThreadState::kRunning;
    track.since = track.start_ns;
    track.cpu = cpu;
  }
  Flush(tid);
  if (track.state == ThreadState::kRunnable || track.state == ThreadState::kBlocked) {
    MissedSwitchIn(tid, track, t);
  }
  EndGap(tid, track, t);
  if (track.state == ThreadState::kRunning) Emit(tid, track, ThreadState::kRunning, track.since, t);
  track.switched_out_ns = t;
  track.unended_stack = 0;
  const bool raced = track.racing_wake && t - track.racing_wake_ns <= kRaceWindowNs;
  track.racing_wake = false;
  track.was_blocked = false;
  if (format::TaskState(prev_state) == 0 || raced) {  // preempted, or woken before it was gone
    BecomeRunnable(tid, track, t, cpu, (prev_state & format::kSwitchThrottled) != 0);
    return;
  }
  track.state = ThreadState::kBlocked;
  track.since = t;
  track.blocked_since = t;
  track.prev_state = prev_state;
  track.wake = {};
  track.cpu = cpu;
}

void ThreadTimeline::SwitchIn(uint32_t tid, Track& track, uint64_t t, uint32_t cpu) {
  // Queued since the start, with no wakeup in between; who held its CPU
  // before this switch is not in the trace.
  if (FromStart(track)) BecomeRunnable(tid, track, track.start_ns, cpu, /*throttled=*/false);
  Flush(tid);
  // Switched in while it runs: its switch-out is not in the trace, and
  // when it stopped running is not known.
  if (track.state == ThreadState::kRunning && t > track.since) LoseTrack(tid, track, track.since);
  EndGap(tid, track, t);
  track.pending_blocked.state = ThreadState::kUnknown;
  track.pending_runnable.state = ThreadState::kUnknown;
  if (track.state == ThreadState::kRunnable) {
    LeaveWaiters(tid, track.cpu);
    HoldersDoing(track.holders, track.since, t);
    track.pending_runnable = {.tid = tid,
                              .state = ThreadState::kRunnable,
                              .begin_ns = track.since,
                              .end_ns = t,
                              .cpu = cpu,
                              .holders = track.holders,
                              .throttled = track.throttled};
    if (track.was_blocked) track.pending_blocked = Waited(tid, track, track.since);
    track.awaiting = true;
  } else if (track.state == ThreadState::kBlocked) {  // its wakeup is not in the trace
    track.pending_blocked = Waited(tid, track, t);
    track.awaiting = true;
  }
  // Never seen, or its time since it was last seen is an unknown stretch.
  track.state = ThreadState::kRunning;
  track.since = t;
  track.cpu = cpu;
  track.was_blocked = false;
  track.racing_wake = false;
}

void ThreadTimeline::BecomeRunnable(uint32_t tid, Track& track, uint64_t t, uint32_t cpu,
                                    bool throttled) {
  // Queued once: a stale entry would outlive the track it points at.
  if (track.state == ThreadState::kRunnable) LeaveWaiters(tid, track.cpu);
  track.state = ThreadState::kRunnable;
  track.throttled = throttled;
  track.since = t;
  track.cpu = cpu;
  track.credited_until = t;
  track.holders.clear();
  CpuOf(cpu).waiters.emplace_back(tid, &track);
}

void ThreadTimeline::Credit(Track& track, uint32_t holder, uint64_t until) {
  if (until <= track.credited_until) return;
  const uint64_t ns = until - track.credited_until;
  track.credited_until = until;
  for (Holder& known : track.holders) {
    if (known.tid == holder) {
      known.ns += ns;
      return;
    }
  }
  track.holders.push_back({holder, ns});
}

void ThreadTimeline::LeaveWaiters(uint32_t tid, uint32_t cpu) {
  auto& waiters = CpuOf(cpu).waiters;
  auto it = std::find_if(waiters.begin(), waiters.end(),
                         [tid](const auto& waiter) { return waiter.first == tid; });
  if (it != waiters.end()) waiters.erase(it);
}

void ThreadTimeline::OnWakeup(const format::Record& record, const format::SchedWakeup& wakeup) {
  sched_seen_ = true;
  if (wakeup.is_new) Reborn(wakeup.woken_tid, record.time_ns);
  Track* woken = Traced(wakeup.woken_tid);
  if (woken == nullptr) return;
  const uint64_t t = record.time_ns;
  Wake wake{.seen = true, .tid = record.tid, .context = wakeup.context};
  if (wakeup.is_new) {  // it did not exist before
    woken->from_start = false;
    if (woken->state == ThreadState::kUnknown) woken->in_gap = false;
  }
  if (FromStart(*woken)) {
    // Asleep since the start: why is not known (its switch-out came before).
    woken->state = ThreadState::kBlocked;
    woken->since = woken->blocked_since = woken->start_ns;
    woken->prev_state = 0;
    woken->wake = {};
    woken->cpu = wakeup.target_cpu;
  }
  if (wakeup.is_new || woken->state == ThreadState::kUnknown) {
    EndGap(wakeup.woken_tid, *woken, t);
    woken->was_blocked = false;
    BecomeRunnable(wakeup.woken_tid, *woken, t, wakeup.target_cpu, /*throttled=*/false);
    return;
  }
  if (woken->state == ThreadState::kRunning) {
    woken->racing_wake = true;
    woken->racing_wake_ns = t;
    return;
  }
  if (woken->state != ThreadState::kBlocked) return;  // already runnable
  if (wake.context == format::WakerContext::kTask) {
    if (const History waker = HistoryOf(record.tid); waker.samples != nullptr) {
      Doing(*waker.samples, *waker.waits, woken->blocked_since, t, &wake);
      // Its own wait ended by the thread it now wakes (a reply to a
      // request): no step further, the chain would go round.
      if (wake.doing_woken_by == wakeup.woken_tid) wake.doing_woken_by = 0;
    }
  }
  woken->wake = wake;
  woken->was_blocked = true;
  BecomeRunnable(wakeup.woken_tid, *woken, t, wakeup.target_cpu, /*throttled=*/false);
}

void ThreadTimeline::OnMigrate(const format::Record& record, const format::SchedMigrate& migrate) {
  Track* track = Traced(record.tid);
  if (track == nullptr || track->state != ThreadState::kRunnable) return;
  const Cpu& from = CpuOf(track->cpu);
  if (from.current_known) {
    Credit(*track, from.current, record.time_ns);
  } else {
    track->credited_until = record.time_ns;  // who held it is not in the trace
  }
  LeaveWaiters(record.tid, track->cpu);
  track->cpu = migrate.dest_cpu;
  CpuOf(migrate.dest_cpu).waiters.emplace_back(record.tid, track);
}

void ThreadTimeline::OnOffCpu(const format::Record& record, uint32_t stack) {
  Track* traced = Traced(record.tid);
  if (traced == nullptr) return;
  Track& track = *traced;
  const auto& off = std::get<format::OffCpu>(record.payload);
  // (In a trace that starts mid-session the wait covers what the trace
  // does not say, from before its start: known after all.)
  if (track.state == ThreadState::kUnknown && track.switched_out_ns == 0 &&
      record.time_ns >= off.duration_ns &&
      (!track.in_gap || record.time_ns - off.duration_ns <= track.gap_since)) {
    // Never switched while traced: louped's account, when tracing stopped,
    // of a sleep all along (asleep_all_along.h), with its kernel stack.
    track.from_start = false;
    track.in_gap = false;
    track.state = ThreadState::kBlocked;
    track.since = track.blocked_since = track.switched_out_ns = record.time_ns - off.duration_ns;
    track.prev_state = off.prev_state;
    track.wake = {};
    track.cpu = record.cpu;
    track.unended_stack = stack;
    return;
  }
  if (track.state != ThreadState::kRunning &&
      record.time_ns - off.duration_ns == track.switched_out_ns) {
    // The trace ends in this wait: its stacks are for Finish.
    track.unended_stack = stack;
    return;
  }
  if (!track.awaiting) return;
  // The interval's record follows its switch-in at the same time.
  if (track.state != ThreadState::kRunning || track.since != record.time_ns) return;
  track.pending_blocked.stack = stack;
  if (track.pending_blocked.state == ThreadState::kBlocked) track.pending_blocked.prev_state = off.prev_state;
  Flush(record.tid);
}

void ThreadTimeline::Flush(uint32_t tid) {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.awaiting) return;
  Track& track = it->second;
  track.awaiting = false;
  if (track.pending_blocked.state == ThreadState::kBlocked) {
    const StateInterval& blocked = track.pending_blocked;
    if (blocked.stack != 0) {
      const bool by_task = blocked.wake.seen && blocked.wake.context == format::WakerContext::kTask;
      track.recent_waits[track.next_wait++ % kRecent] = {blocked.begin_ns, blocked.end_ns,
                                                          blocked.stack,
                                                          by_task ? blocked.wake.tid : 0};
    }
    sink_(blocked);
  }
  if (track.pending_runnable.state == ThreadState::kRunnable) sink_(track.pending_runnable);
  track.pending_blocked.state = ThreadState::kUnknown;
  track.pending_runnable.state = ThreadState::kUnknown;
}

void ThreadTimeline::Emit(uint32_t tid, Track& track, ThreadState state, uint64_t begin,
                          uint64_t end) {
  if (end < begin) return;
  sink_(StateInterval{.tid = tid, .state = state, .begin_ns = begin, .end_ns = end, .cpu = track.cpu});
}

// What the waker did while the woken thread waited: the stack its samples
// hit most in that time, else the wait of its own that overlapped most
// (a lock held across a sleep), else nothing.
void ThreadTimeline::Doing(const RecentLog& samples, const RecentLog& waits, uint64_t begin,
                           uint64_t end, Wake* wake) const {
  // The waker's own waits within the woken thread's, and the longest one.
  uint64_t off_cpu_ns = 0, best_overlap = 0;
  uint32_t best_wait = 0, best_woken_by = 0;
  for (const Recent& wait : waits) {
    if (wait.stack == 0) continue;
    const uint64_t lo = std::max(wait.begin_ns, begin), hi = std::min(wait.end_ns, end);
    if (hi <= lo) continue;
    off_cpu_ns += hi - lo;
    if (hi - lo > best_overlap) {
      best_wait = wait.stack, best_overlap = hi - lo, best_woken_by = wait.woken_by;
    }
  }
  // Off CPU for most of that time: its own wait says more than a sample
  // from the rest (it ran 3 ms, then slept 25 ms before it signalled), and
  // whoever ended that wait, a step further along the chain.
  if (best_wait != 0 && 2 * off_cpu_ns > end - begin) {
    wake->doing_stack = best_wait;
    wake->doing_off_cpu = true;
    wake->doing_woken_by = best_woken_by;
    return;
  }
  if (const uint32_t sampled = MostSampled(samples, begin, end, kDoingSlackNs); sampled != 0) {
    wake->doing_stack = sampled;
    return;
  }
  wake->doing_stack = best_wait;
  wake->doing_off_cpu = best_wait != 0;
}

uint32_t ThreadTimeline::MostSampled(const RecentLog& samples, uint64_t begin, uint64_t end,
                                     uint64_t slack_ns) {
  const uint64_t from = begin > slack_ns ? begin - slack_ns : 0;
  std::array<uint32_t, kRecent> in_window;
  size_t n = 0;
  for (const Recent& sample : samples) {
    if (sample.stack != 0 && sample.begin_ns >= from && sample.begin_ns <= end) {
      in_window[n++] = sample.stack;
    }
  }
  uint32_t best = 0;
  size_t best_count = 0;
  for (size_t i = 0; i < n && best_count <= (n - i); ++i) {
    const size_t count = static_cast<size_t>(std::count(&in_window[i], &in_window[n], in_window[i]));
    if (count > best_count) best = in_window[i], best_count = count;
  }
  return best;
}

void ThreadTimeline::HoldersDoing(std::vector<Holder>& holders, uint64_t begin, uint64_t end) const {
  for (Holder& holder : holders) {
    if (const History held = HistoryOf(holder.tid); holder.tid != 0 && held.samples != nullptr) {
      // Its samples in the wait say what it held the CPU for; before the
      // wait, it may have been at something else (a phase that just ended).
      holder.doing_stack = MostSampled(*held.samples, begin, end, 0);
      if (holder.doing_stack == 0) {
        holder.doing_stack = MostSampled(*held.samples, begin, end, kDoingSlackNs);
      }
    }
  }
}

ThreadTimeline::History ThreadTimeline::HistoryOf(uint32_t tid) const {
  if (auto it = threads_.find(tid); it != threads_.end()) {
    return {&it->second.recent_samples, &it->second.recent_waits};
  }
  if (auto gone = departed_.find(tid); gone != departed_.end()) {
    return {&gone->second.recent_samples, &gone->second.recent_waits};
  }
  return {};
}

void ThreadTimeline::Finish(uint64_t end_ns) {
  // In tid order, so that what is emitted last does not depend on the hash
  // map's layout: exports of one trace are then the same bytes every time.
  std::vector<uint32_t> tids;
  tids.reserve(threads_.size());
  for (const auto& entry : threads_) tids.push_back(entry.first);
  std::sort(tids.begin(), tids.end());
  for (const uint32_t tid : tids) {
    Track& track = threads_.at(tid);
    Flush(tid);
    EndTrack(tid, track, end_ns);
  }
}

void ThreadTimeline::EndTrack(uint32_t tid, Track& track, uint64_t end_ns) {
  if (end_ns < track.since) return;
  // Exited, and off its CPU when the trace lost it (its switch-in and last
  // switch not in the trace): no wait of a thread that is gone.
  if (track.exited && track.state != ThreadState::kRunning) return;
  switch (track.state) {
    case ThreadState::kRunning:
      // Exited, its last switch not in the trace: it ran to its exit at least.
      Emit(tid, track, ThreadState::kRunning, track.since,
           track.exited ? std::max(track.since, track.exited_ns) : end_ns);
      break;
    case ThreadState::kBlocked:
      sink_(Waited(tid, track, end_ns));
      break;
    case ThreadState::kRunnable: {
      const Cpu& cpu = CpuOf(track.cpu);
      if (cpu.current_known) Credit(track, cpu.current, end_ns);
      HoldersDoing(track.holders, track.since, end_ns);
      if (track.was_blocked) sink_(Waited(tid, track, track.since));
      sink_({.tid = tid,
             .state = ThreadState::kRunnable,
             .begin_ns = track.since,
             .end_ns = end_ns,
             .cpu = track.cpu,
             .holders = track.holders,
             .throttled = track.throttled});
      break;
    }
    case ThreadState::kUnknown:
      EndGap(tid, track, end_ns);
      break;
  }
}

StateInterval ThreadTimeline::Waited(uint32_t tid, const Track& track, uint64_t end) {
  return {.tid = tid,
          .state = ThreadState::kBlocked,
          .begin_ns = track.blocked_since,
          .end_ns = end,
          .cpu = track.cpu,
          .prev_state = track.prev_state,
          .stack = track.unended_stack,
          .wake = track.wake};
}

void ThreadTimeline::LoseTrack(uint32_t tid, Track& track, uint64_t since) {
  if (track.state == ThreadState::kRunnable) LeaveWaiters(tid, track.cpu);
  track.state = ThreadState::kUnknown;
  track.in_gap = true;
  track.gap_since = since;
}

void ThreadTimeline::EndGap(uint32_t tid, Track& track, uint64_t t) {
  if (!track.in_gap) return;
  track.in_gap = false;
  if (t > track.gap_since) {
    sink_({.tid = tid, .state = ThreadState::kUnknown, .begin_ns = track.gap_since, .end_ns = t,
           .cpu = track.cpu});
  }
}

void ThreadTimeline::MissedSwitchIn(uint32_t tid, Track& track, uint64_t t) {
  Flush(tid);
  // Its wait up to the wakeup is known; when the run-queue wait ended is not.
  if (track.state == ThreadState::kRunnable && track.was_blocked) {
    sink_(Waited(tid, track, track.since));
  }
  track.was_blocked = false;
  LoseTrack(tid, track, track.since);
  EndGap(tid, track, t);
}

}  // namespace loupe::analysis
