// The per-thread state timeline on hand-built scheduler records: every
// nanosecond in one state, wakeups that race the switch-out, preemption
// right after a wakeup, migration while runnable, interrupt wakeups, and
// switches missing from the trace.
#include "analysis/thread_timeline.h"

#include <gtest/gtest.h>

#include <vector>

namespace loupe::analysis {
namespace {

using format::Record;
using format::SchedSwitch;
using format::SchedWakeup;
using format::WakerContext;

constexpr uint32_t kPid = 100, kA = 101, kB = 102;

struct Seen {
  ThreadState state;
  uint64_t begin, end;
  uint32_t wake_tid = 0;
  WakerContext context = WakerContext::kTask;
  bool woken = false;
  uint32_t stack = 0;
  std::vector<Holder> holders;
  bool throttled = false;
  uint32_t doing = 0;  // what the waker was doing: a stack
  bool doing_off_cpu = false;
  uint32_t doing_woken_by = 0;
};

class TimelineTest : public ::testing::Test {
 protected:
  TimelineTest() {
    Feed({.tid = kPid, .payload = format::ProcessInfo{.name = "svc"}});
    Feed({.tid = kA, .payload = format::ThreadInfo{.pid = kPid, .name = "a"}});
    Feed({.tid = kB, .payload = format::ThreadInfo{.pid = kPid, .name = "b"}});
  }
  void Feed(const Record& record, uint32_t stack = 0) {
    directory_.Observe(record);
    timeline_.Add(record, stack);
  }
  void Switch(uint64_t t, uint32_t cpu, uint32_t prev, uint32_t next, uint32_t prev_state) {
    Feed({.time_ns = t, .tid = prev, .cpu = cpu, .payload = SchedSwitch{next, prev_state}});
  }
  void Wake(uint64_t t, uint32_t waker, uint32_t woken, uint32_t cpu,
            WakerContext context = WakerContext::kTask) {
    Feed({.time_ns = t,
          .tid = waker,
          .cpu = cpu,
          .payload = SchedWakeup{.woken_tid = woken, .target_cpu = cpu, .context = context}});
  }
  // The intervals of one thread, in the order they ended.
  std::vector<Seen> Of(uint32_t tid) const {
    std::vector<Seen> mine;
    for (size_t i = 0; i < seen_.size(); ++i) {
      if (tids_[i] == tid) mine.push_back(seen_[i]);
    }
    return mine;
  }

  ThreadDirectory directory_;
  std::vector<Seen> seen_;
  std::vector<uint32_t> tids_;
  ThreadTimeline timeline_{directory_, [this](const StateInterval& interval) {
                             seen_.push_back({interval.state, interval.begin_ns, interval.end_ns,
                                              interval.wake.tid, interval.wake.context,
                                              interval.wake.seen, interval.stack,
                                              {interval.holders.begin(), interval.holders.end()},
                                              interval.throttled, interval.wake.doing_stack,
                                              interval.wake.doing_off_cpu,
                                              interval.wake.doing_woken_by});
                             tids_.push_back(interval.tid);
                           }};
};

TEST_F(TimelineTest, SleepWakeupAndRunAddUpWithTheirEvidence) {
  Switch(1'000, 0, 0, kA, 0);          // a starts running
  Switch(5'000, 0, kA, 0, 1);          // sleeps (S)
  Wake(9'000, kB, kA, 0);              // b wakes it
  Switch(9'500, 0, 0, kA, 0);          // idle hands the CPU over
  Feed({.time_ns = 9'500, .tid = kA, .cpu = 0, .payload = format::OffCpu{.prev_state = 1}}, 7);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].state, ThreadState::kRunning);
  EXPECT_EQ(a[0].end - a[0].begin, 4'000u);
  EXPECT_EQ(a[1].state, ThreadState::kBlocked);
  EXPECT_EQ(a[1].begin, 5'000u);
  EXPECT_EQ(a[1].end, 9'000u);  // blocked until the wakeup, not the switch-in
  EXPECT_TRUE(a[1].woken);
  EXPECT_EQ(a[1].wake_tid, kB);
  EXPECT_EQ(a[1].stack, 7u);  // the switch-out's stacks, from the off_cpu record
  EXPECT_EQ(a[2].state, ThreadState::kRunnable);
  EXPECT_EQ(a[2].end - a[2].begin, 500u);  // waiting for the CPU counts once, here
  ASSERT_EQ(a[2].holders.size(), 1u);
  EXPECT_EQ(a[2].holders[0].tid, 0u);  // the CPU was idle, waking up
  EXPECT_EQ(a[2].holders[0].ns, 500u);
  EXPECT_EQ(timeline_.state(kA), ThreadState::kRunning);
}

// Tracing stopped while a slept and b, woken, waited for the CPU: the
// session writes each its wait so far as an off_cpu record at the end, with
// no switch-in; the waits reach the trace's end with their stacks.
TEST_F(TimelineTest, WaitsTheTraceEndsInKeepTheirSwitchOutStacks) {
  Switch(1'000, 0, 0, kA, 0);
  Switch(2'000, 0, kA, kB, 1);  // a sleeps, b runs
  Switch(3'000, 0, kB, 0, 1);   // b sleeps
  Wake(4'000, 0, kB, 0);
  Feed({.time_ns = 6'000, .tid = kA, .cpu = 0,
        .payload = format::OffCpu{.duration_ns = 4'000, .prev_state = 1}}, 7);
  Feed({.time_ns = 6'000, .tid = kB, .cpu = 0,
        .payload = format::OffCpu{.duration_ns = 3'000, .runq_ns = 2'000, .prev_state = 1}}, 8);
  timeline_.Finish(6'000);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].state, ThreadState::kBlocked);
  EXPECT_EQ(a[1].begin, 2'000u);
  EXPECT_EQ(a[1].end, 6'000u);
  EXPECT_FALSE(a[1].woken);
  EXPECT_EQ(a[1].stack, 7u);
  const std::vector<Seen> b = Of(kB);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[1].state, ThreadState::kBlocked);
  EXPECT_EQ(b[1].end, 4'000u);
  EXPECT_EQ(b[1].stack, 8u);
  EXPECT_EQ(b[2].state, ThreadState::kRunnable);
  EXPECT_EQ(b[2].end, 6'000u);
}

TEST_F(TimelineTest, PreemptionRightAfterAWakeupIsRunQueueTimeHeldByThePreempter) {
  Switch(10, 0, 0, kA, 0);
  Switch(20, 0, kA, 0, 1);
  Wake(30, kB, kA, 0);
  Switch(35, 0, 0, kA, 0);   // runs 5 ns
  Switch(40, 0, kA, kB, 0);  // preempted by b at once
  Switch(70, 0, kB, kA, 0);  // b held the CPU 30 ns
  timeline_.Flush(kA);       // no off_cpu record follows: what waited for one goes out
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[3].state, ThreadState::kRunning);
  EXPECT_EQ(a[3].end - a[3].begin, 5u);
  EXPECT_EQ(a[4].state, ThreadState::kRunnable);
  EXPECT_EQ(a[4].begin, 40u);
  EXPECT_EQ(a[4].end, 70u);
  ASSERT_EQ(a[4].holders.size(), 1u);
  EXPECT_EQ(a[4].holders[0].tid, kB);
  EXPECT_EQ(a[4].holders[0].ns, 30u);
}

TEST_F(TimelineTest, APreemptionWithTheQuotaSpentIsAThrottledRunQueueWait) {
  Switch(10, 0, 0, kA, 0);
  Switch(40, 0, kA, 0, format::kSwitchThrottled);  // the cgroup's quota is spent: the CPU idles
  Switch(90, 0, 0, kA, 0);                         // the quota refilled
  Switch(95, 0, kA, kB, 0);                        // an ordinary preemption
  Switch(99, 0, kB, kA, 0);
  timeline_.Flush(kA);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[1].state, ThreadState::kRunnable) << "throttled is runnable, not blocked";
  EXPECT_EQ(a[1].begin, 40u);
  EXPECT_EQ(a[1].end, 90u);
  EXPECT_TRUE(a[1].throttled);
  ASSERT_EQ(a[1].holders.size(), 1u);
  EXPECT_EQ(a[1].holders[0].tid, 0u);
  EXPECT_EQ(a[3].state, ThreadState::kRunnable);
  EXPECT_FALSE(a[3].throttled);
}

TEST_F(TimelineTest, AWakeupSeenBeforeTheSwitchOutMakesItRunnableNotBlocked) {
  Switch(100, 0, 0, kA, 0);
  Wake(200, kB, kA, 1);        // raced: a is still on its way out
  Switch(203, 0, kA, 0, 1);    // switch-out says S, but it was woken already
  Switch(250, 0, 0, kA, 0);
  timeline_.Flush(kA);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].state, ThreadState::kRunning);
  EXPECT_EQ(a[1].state, ThreadState::kRunnable);
  EXPECT_EQ(a[1].begin, 203u);
  EXPECT_EQ(a[1].end, 250u);
}

TEST_F(TimelineTest, MigrationWhileRunnableCreditsTheHoldersOfBothCpus) {
  constexpr uint32_t kNoisy1 = 201, kNoisy2 = 202, kNoisy3 = 203;
  Switch(10, 0, 0, kA, 0);
  Switch(20, 0, kA, kNoisy1, 1);  // a sleeps, noisy1 runs on cpu 0
  Wake(100, kB, kA, 0);           // queued on cpu 0
  Switch(110, 0, kNoisy1, kNoisy2, 0);
  Feed({.time_ns = 120, .tid = kA, .cpu = 0, .payload = format::SchedMigrate{0, 1}});
  Switch(130, 1, kNoisy3, kA, 0);  // runs on cpu 1
  timeline_.Flush(kA);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.back().state, ThreadState::kRunnable);
  EXPECT_EQ(a.back().end - a.back().begin, 30u);
  uint64_t credited = 0;
  std::vector<uint32_t> who;
  for (const Holder& holder : a.back().holders) {
    credited += holder.ns;
    who.push_back(holder.tid);
    EXPECT_EQ(holder.ns, 10u) << holder.tid;
  }
  EXPECT_EQ(credited, 30u);
  EXPECT_EQ(who, (std::vector<uint32_t>{kNoisy1, kNoisy2, kNoisy3}));
}

TEST_F(TimelineTest, InterruptWakeupsKeepTheirContextNotTheInterruptedTask) {
  Switch(10, 0, 0, kA, 0);
  Switch(20, 0, kA, kB, 1);
  Wake(50, kB, kA, 0, WakerContext::kTimer);  // b was only the task the timer interrupted
  Switch(60, 0, kB, kA, 0);
  timeline_.Flush(kA);
  const std::vector<Seen> a = Of(kA);
  ASSERT_GE(a.size(), 2u);
  EXPECT_EQ(a[1].state, ThreadState::kBlocked);
  EXPECT_EQ(a[1].context, WakerContext::kTimer);
}

TEST_F(TimelineTest, ASwitchMissingFromTheTraceLeavesTimeUnaccountedNotRunning) {
  Switch(10, 0, 0, kA, 0);  // a runs on cpu 0
  Switch(50, 0, kB, 0, 1);  // yet b switches out of cpu 0: a's switch-out is lost
  EXPECT_EQ(timeline_.state(kA), ThreadState::kUnknown);
  EXPECT_TRUE(Of(kA).empty());
  timeline_.Finish(100);
  // Said as a stretch no switch places, not guessed to be running.
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].state, ThreadState::kUnknown);
  EXPECT_EQ(a[0].begin, 10u);
  EXPECT_EQ(a[0].end, 100u);
}

// a slept, was woken, was preempted-in with no switch-in in the trace (the
// kernel did not report it, louped could not place it): its own CPU sample
// proves it ran. The wait up to the wakeup is exact; when its run-queue
// wait ended is not known, so that stretch is unknown, not run-queue time.
TEST_F(TimelineTest, ARecordOfItsOwnWhileRunnableEndsAStretchNoSwitchPlaces) {
  Switch(1'000, 0, 0, kA, 0);
  Switch(2'000, 0, kA, 0, 1);  // sleeps
  Wake(3'000, kB, kA, 0);
  Feed({.time_ns = 9'000, .tid = kA, .cpu = 0, .payload = format::CpuSample{}}, 5);
  Switch(12'000, 0, kA, 0, 0);  // preempted
  timeline_.Finish(13'000);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[1].state, ThreadState::kBlocked);
  EXPECT_EQ(a[1].begin, 2'000u);
  EXPECT_EQ(a[1].end, 3'000u);
  EXPECT_EQ(a[1].wake_tid, kB);
  EXPECT_EQ(a[2].state, ThreadState::kUnknown);
  EXPECT_EQ(a[2].begin, 3'000u);
  EXPECT_EQ(a[2].end, 9'000u);
  EXPECT_EQ(a[3].state, ThreadState::kRunning);
  EXPECT_EQ(a[3].begin, 9'000u);
  EXPECT_EQ(a[3].end, 12'000u);
  EXPECT_EQ(a[4].state, ThreadState::kRunnable);
  EXPECT_EQ(a[4].end, 13'000u);
  // Every nanosecond from its first switch-in on is in one interval.
  for (size_t i = 1; i < a.size(); ++i) EXPECT_EQ(a[i].begin, a[i - 1].end);
}

// Preempted, then switched out again with no switch-in between: the time
// between is not run-queue time, nor dropped without a word.
TEST_F(TimelineTest, ASecondSwitchOutWithNoSwitchInBetweenIsAStretchNoSwitchPlaces) {
  Switch(1'000, 0, 0, kA, 0);
  Switch(2'000, 0, kA, kB, 0);  // preempted by b
  Switch(7'000, 1, kA, 0, 1);   // switches out of cpu 1: its switch-in there is missing
  Wake(8'000, kB, kA, 1);
  Switch(8'500, 1, 0, kA, 0);
  timeline_.Finish(9'000);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].state, ThreadState::kRunning);
  EXPECT_EQ(a[1].state, ThreadState::kUnknown);
  EXPECT_EQ(a[1].begin, 2'000u);
  EXPECT_EQ(a[1].end, 7'000u);
  EXPECT_EQ(a[2].state, ThreadState::kBlocked);
  EXPECT_EQ(a[2].begin, 7'000u);
  EXPECT_EQ(a[3].state, ThreadState::kRunnable);
  EXPECT_EQ(a[4].state, ThreadState::kRunning);
  EXPECT_EQ(a[4].end, 9'000u);
}

// b, not the main thread, calls exec: the kernel ends the main thread and
// b goes on under the main thread's tid. b's running ends at the exec; the
// main thread's tid runs from there. No stretch is left unplaced.
TEST_F(TimelineTest, AnExecFromAnotherThanTheMainThreadHandsItsTidOver) {
  Feed({.tid = kPid, .payload = format::ThreadInfo{.pid = kPid, .name = "main"}});
  Switch(1'000, 0, 0, kB, 0);
  Switch(1'000, 1, 0, kPid, 0);
  Feed({.time_ns = 2'000, .tid = kPid, .cpu = 1, .payload = format::ThreadExit{.pid = kPid}});
  Switch(2'100, 1, kPid, 0, format::kTaskDead);
  Feed({.time_ns = 3'000,
        .tid = kPid,
        .cpu = 0,
        .payload = format::ProcessExec{.pid = kPid, .filename = "/bin/svc", .old_tid = kB}});
  Switch(4'000, 0, kPid, 0, 1);
  timeline_.Finish(5'000);
  const std::vector<Seen> b = Of(kB);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].state, ThreadState::kRunning);
  EXPECT_EQ(b[0].begin, 1'000u);
  EXPECT_EQ(b[0].end, 3'000u);
  const std::vector<Seen> main = Of(kPid);
  ASSERT_EQ(main.size(), 3u);
  EXPECT_EQ(main[0].end, 2'100u);  // its last switch
  EXPECT_EQ(main[1].state, ThreadState::kRunning);
  EXPECT_EQ(main[1].begin, 3'000u);
  EXPECT_EQ(main[1].end, 4'000u);
  EXPECT_EQ(main[2].state, ThreadState::kBlocked);
  for (const Seen& seen : seen_) EXPECT_NE(seen.state, ThreadState::kUnknown);
}

// a was runnable; its own record proves it ran (no switch-in), then it
// exits, and the CPU it waited for switches on: nothing still points at it.
TEST_F(TimelineTest, AThreadThatRanUnseenAndExitedLeavesNoWaiterBehind) {
  Switch(1'000, 0, 0, kA, 0);
  Switch(2'000, 0, kA, kB, 0);  // a preempted: runnable on cpu 0
  Feed({.time_ns = 3'000, .tid = kA, .cpu = 1, .payload = format::CpuSample{}}, 5);
  Feed({.time_ns = 4'000, .tid = kA, .cpu = 1, .payload = format::ThreadExit{.pid = kPid}});
  Switch(5'000, 0, kB, 0, 1);  // credits cpu 0's waiters
  timeline_.Finish(6'000);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[1].state, ThreadState::kUnknown);
  EXPECT_EQ(a[1].begin, 2'000u);
  EXPECT_EQ(a[1].end, 3'000u);
  EXPECT_EQ(a[2].state, ThreadState::kRunning);
  EXPECT_EQ(a[2].end, 4'000u);
}

// A switch-in while the thread still runs: its switch-out is missing, and
// when it stopped is not known.
TEST_F(TimelineTest, ASwitchInWhileRunningIsAStretchNoSwitchPlaces) {
  Switch(1'000, 0, 0, kA, 0);
  Switch(4'000, 1, 0, kA, 0);  // on cpu 1 before cpu 0 said it left
  Switch(5'000, 1, kA, 0, 1);
  timeline_.Finish(6'000);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].state, ThreadState::kUnknown);
  EXPECT_EQ(a[0].begin, 1'000u);
  EXPECT_EQ(a[0].end, 4'000u);
  EXPECT_EQ(a[1].state, ThreadState::kRunning);
  EXPECT_EQ(a[2].state, ThreadState::kBlocked);
}

// The thread that called exec was in a stretch no switch placed: the
// stretch ends at the exec, and nothing of it is left open.
TEST_F(TimelineTest, AnExecFromAThreadInAStretchEndsTheStretch) {
  Feed({.tid = kPid, .payload = format::ThreadInfo{.pid = kPid, .name = "main"}});
  Switch(1'000, 0, 0, kB, 0);
  Switch(2'000, 0, kA, 0, 1);  // b's switch-out is lost: a stretch from 1'000
  Feed({.time_ns = 3'000,
        .tid = kPid,
        .cpu = 1,
        .payload = format::ProcessExec{.pid = kPid, .filename = "/bin/svc", .old_tid = kB}});
  timeline_.Finish(5'000);
  const std::vector<Seen> b = Of(kB);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].state, ThreadState::kUnknown);
  EXPECT_EQ(b[0].end, 3'000u);
  const std::vector<Seen> main = Of(kPid);
  ASSERT_EQ(main.size(), 1u);
  EXPECT_EQ(main[0].state, ThreadState::kRunning);
  EXPECT_EQ(main[0].begin, 3'000u);
}

// b never switched while traced; louped's off_cpu at the end says it slept
// from the trace's start: one blocked interval with its stack, b listed.
TEST_F(TimelineTest, AThreadAsleepAllAlongIsBlockedFromTheStart) {
  Switch(1'000, 0, 0, kA, 0);
  Switch(5'000, 0, kA, 0, 1);
  Feed({.time_ns = 9'000, .tid = kB, .cpu = 0,
        .payload = format::OffCpu{.duration_ns = 8'000, .prev_state = 1}}, 7);
  timeline_.Finish(9'000);
  const std::vector<Seen> b = Of(kB);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].state, ThreadState::kBlocked);
  EXPECT_EQ(b[0].begin, 1'000u);
  EXPECT_EQ(b[0].end, 9'000u);
  EXPECT_EQ(b[0].stack, 7u);
  EXPECT_FALSE(b[0].woken);
}

// The trace opens with louped's clock_sync at the moment recording began:
// a thread's first record then tells its state since that moment — on the
// CPU until its first switch-out, queued until a switch-in with no wakeup
// before it, asleep (why untold) until its first wakeup.
TEST_F(TimelineTest, AThreadsFirstRecordTellsItsStateSinceRecordingBegan) {
  constexpr uint32_t kC = 103, kD = 104;
  // The session's preamble, then its opening clock_sync, at one time.
  Feed({.time_ns = 1'000, .tid = kPid, .payload = format::ProcessInfo{.name = "svc"}});
  for (const uint32_t tid : {kA, kB, kC, kD, 105u}) {
    Feed({.time_ns = 1'000, .tid = tid, .payload = format::ThreadInfo{.pid = kPid, .name = "t"}});
  }
  Feed({.time_ns = 1'000, .payload = format::ClockSync{}});
  Switch(3'000, 0, kA, kB, 0);  // a ran since the start; b waited for the CPU
  constexpr uint32_t kE = 105;  // ran from the start to its exit, unswitched
  Feed({.time_ns = 2'000, .tid = kE, .cpu = 1, .payload = format::ThreadExit{}});
  Switch(2'050, 1, kE, 0, format::kTaskDead);
  Wake(4'000, kB, kC, 1);       // c slept since the start
  Switch(4'500, 1, 0, kC, 0);
  Feed({.time_ns = 5'000, .tid = kD, .cpu = 1, .payload = format::CpuSample{}});  // d ran
  Switch(6'000, 1, kD, 0, 1);
  timeline_.Flush(kB);
  timeline_.Flush(kC);
  const std::vector<Seen> a = Of(kA), b = Of(kB), c = Of(kC), d = Of(kD);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].state, ThreadState::kRunning);
  EXPECT_EQ(a[0].begin, 1'000u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].state, ThreadState::kRunnable);
  EXPECT_EQ(b[0].begin, 1'000u);
  EXPECT_EQ(b[0].end, 3'000u);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].state, ThreadState::kBlocked);
  EXPECT_EQ(c[0].begin, 1'000u);
  EXPECT_EQ(c[0].end, 4'000u);
  EXPECT_TRUE(c[0].woken);
  EXPECT_EQ(c[0].wake_tid, kB);
  EXPECT_EQ(c[0].stack, 0u);  // its switch-out came before the trace
  EXPECT_EQ(c[1].state, ThreadState::kRunnable);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].state, ThreadState::kRunning);
  EXPECT_EQ(d[0].begin, 1'000u);
  EXPECT_EQ(d[0].end, 6'000u);
  const std::vector<Seen> e = Of(kE);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].state, ThreadState::kRunning);
  EXPECT_EQ(e[0].begin, 1'000u);
  EXPECT_EQ(e[0].end, 2'050u);  // its last switch
}

// Without that record (older traces, replays) the time before a thread's
// first record is in no state, as before; a thread born in the trace (its
// wakeup_new lost or not), or a tid reused after an exit, never had a
// state at the start; in sessions read together, each its own start.
TEST_F(TimelineTest, OnlyThreadsThatExistedWhenRecordingBeganGetTheirStartPlaced) {
  Switch(3'000, 0, kA, 0, 0);
  EXPECT_TRUE(Of(kA).empty());

  constexpr uint32_t kC = 103, kD = 104;
  ThreadDirectory directory;
  std::vector<StateInterval> seen;
  ThreadTimeline timeline(directory, [&](const StateInterval& interval) { seen.push_back(interval); });
  auto feed = [&](const Record& record) {
    directory.Observe(record);
    timeline.Add(record, 0);
  };
  auto of = [&](uint32_t tid) {
    std::vector<StateInterval> mine;
    for (const StateInterval& interval : seen) {
      if (interval.tid == tid) mine.push_back(interval);
    }
    return mine;
  };
  feed({.time_ns = 1'000, .tid = kPid, .payload = format::ProcessInfo{.name = "svc"}});
  feed({.time_ns = 1'000, .tid = kA, .payload = format::ThreadInfo{.pid = kPid, .name = "a"}});
  feed({.time_ns = 1'000, .payload = format::ClockSync{}});
  feed({.time_ns = 1'500, .tid = kC, .payload = format::ThreadInfo{.pid = kPid, .name = "c"}});
  feed({.time_ns = 1'600, .tid = 0, .cpu = 1, .payload = SchedSwitch{kC, 0}});  // no wakeup_new
  feed({.time_ns = 1'700, .tid = kC, .cpu = 1, .payload = SchedSwitch{0, 1}});
  feed({.time_ns = 2'000, .tid = kB, .payload = format::ThreadInfo{.pid = kPid, .name = "b"}});
  feed({.time_ns = 2'000, .tid = kA, .cpu = 0,
        .payload = SchedWakeup{.woken_tid = kB, .target_cpu = 0, .is_new = true}});
  feed({.time_ns = 2'500, .tid = kA, .cpu = 0, .payload = SchedSwitch{kB, 0}});
  timeline.Flush(kB);
  feed({.time_ns = 3'000, .tid = kB, .cpu = 0, .payload = format::ThreadExit{}});
  feed({.time_ns = 3'000, .tid = kB, .cpu = 0, .payload = SchedSwitch{kA, format::kTaskDead}});
  feed({.time_ns = 4'000, .tid = kB, .cpu = 0, .payload = format::CpuSample{}});  // kB again
  // A second session read with the first: its thread from its own start.
  feed({.time_ns = 10'000, .tid = 200, .payload = format::ProcessInfo{.name = "other"}});
  feed({.time_ns = 10'000, .tid = kD, .payload = format::ThreadInfo{.pid = 200, .name = "d"}});
  feed({.time_ns = 10'000, .payload = format::ClockSync{}});
  feed({.time_ns = 12'000, .tid = kD, .cpu = 1, .payload = SchedSwitch{0, 1}});
  timeline.Finish(15'000);
  const std::vector<StateInterval> c = of(kC);
  ASSERT_EQ(c.size(), 2u);  // ran, then asleep to the end
  EXPECT_EQ(c[0].state, ThreadState::kRunning);
  EXPECT_EQ(c[0].begin_ns, 1'600u) << "born after the start: nothing before its first record";
  const std::vector<StateInterval> d = of(kD);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].state, ThreadState::kRunning);
  EXPECT_EQ(d[0].begin_ns, 10'000u);
  const std::vector<StateInterval> b = of(kB);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].state, ThreadState::kRunnable);
  EXPECT_EQ(b[0].begin_ns, 2'000u);  // from its birth, not from the start
  EXPECT_EQ(b[1].state, ThreadState::kRunning);
  EXPECT_EQ(b[1].end_ns, 3'000u);
  EXPECT_EQ(b[2].state, ThreadState::kRunning);
  EXPECT_EQ(b[2].begin_ns, 4'000u);  // the new thread's first record, not the start
}

// b held a's CPU: what b ran during the wait names it, not what it ran
// just before (a phase that had ended).
TEST_F(TimelineTest, AHoldersSamplesInTheWaitSayWhatItHeldTheCpuFor) {
  Switch(100, 0, 0, kA, 0);
  Feed({.time_ns = 500, .tid = kB, .cpu = 1, .payload = format::CpuSample{}}, 5);
  Switch(1'000, 0, kA, kB, 0);
  Feed({.time_ns = 1'500, .tid = kB, .cpu = 0, .payload = format::CpuSample{}}, 6);
  Switch(2'000, 0, kB, kA, 0);
  timeline_.Flush(kA);  // no off_cpu record follows a preemption's switch-in
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(a[1].holders.size(), 1u);
  EXPECT_EQ(a[1].holders[0].tid, kB);
  EXPECT_EQ(a[1].holders[0].doing_stack, 6u);
}

// An exited thread whose last switch is not in the trace ran to its exit
// at least; it does not run on to the trace's end.
TEST_F(TimelineTest, ForeignThreadsHaveNoTimelineAndExitEndsRunning) {
  Feed({.tid = 300, .payload = format::ThreadInfo{.pid = 300, .name = "noisy", .foreign = true,
                                                  .process_name = "bg"}});
  Switch(10, 0, 300, kA, 0);
  Feed({.time_ns = 40, .tid = kA, .cpu = 0, .payload = format::ThreadExit{.pid = kPid}});
  timeline_.Finish(10'000);
  EXPECT_TRUE(Of(300).empty());
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].state, ThreadState::kRunning);
  EXPECT_EQ(a[0].end, 40u);
}

// After its exit record a thread switches out once more, dead: it ran until
// then, and waits for nothing from then on, however long the trace goes on.
TEST_F(TimelineTest, AnExitedThreadsLastSwitchBeginsNoWait) {
  Switch(10, 0, 0, kA, 0);
  Feed({.time_ns = 40, .tid = kA, .cpu = 0, .payload = format::ThreadExit{.pid = kPid}});
  Switch(45, 0, kA, 0, format::kTaskDead);
  Switch(50, 0, 0, kB, 0);
  timeline_.Finish(10'000);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].state, ThreadState::kRunning);
  EXPECT_EQ(a[0].end, 45u);
  const std::vector<Seen> b = Of(kB);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].end, 10'000u);
}

// On its way out after its exit record a thread is preempted, runs again,
// and switches out dead: its time is placed to that last switch. Where
// that switch is missing (another thread switches out on its CPU), it is
// gone there, the stretch between unplaced, not the rest of the trace.
TEST_F(TimelineTest, AnExitingThreadIsPlacedToItsLastSwitch) {
  Switch(10, 0, 0, kA, 0);
  Feed({.time_ns = 40, .tid = kA, .cpu = 0, .payload = format::ThreadExit{.pid = kPid}});
  Switch(50, 0, kA, 0, 0);  // preempted
  Switch(70, 0, 0, kA, 0);
  Switch(80, 0, kA, 0, format::kTaskDead);
  Switch(100, 1, 0, kB, 0);
  Feed({.time_ns = 120, .tid = kB, .cpu = 1, .payload = format::ThreadExit{.pid = kPid}});
  // Its last switch, to another process, unrecorded; that one switches out.
  Switch(200, 1, 300, 0, 1);
  timeline_.Finish(10'000);
  const std::vector<Seen> a = Of(kA);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].state, ThreadState::kRunning);
  EXPECT_EQ(a[0].end, 50u);
  EXPECT_EQ(a[1].state, ThreadState::kRunnable);
  EXPECT_EQ(a[2].state, ThreadState::kRunning);
  EXPECT_EQ(a[2].begin, 70u);
  EXPECT_EQ(a[2].end, 80u);
  const std::vector<Seen> b = Of(kB);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].state, ThreadState::kRunning);
  EXPECT_EQ(b[0].begin, 100u);
  EXPECT_EQ(b[0].end, 120u);
  EXPECT_EQ(b[1].state, ThreadState::kUnknown);
  EXPECT_EQ(b[1].begin, 120u);
  EXPECT_EQ(b[1].end, 200u);
}

// An exited thread preempted on its way out whose switch-in and last
// switch the trace lacks waits for nothing to the trace's end; a new
// thread that gets its tid starts afresh.
TEST_F(TimelineTest, AnExitedThreadLostOffItsCpuWaitsForNothing) {
  Switch(10, 0, 0, kA, 0);
  Feed({.time_ns = 40, .tid = kA, .cpu = 0, .payload = format::ThreadExit{.pid = kPid}});
  Switch(50, 0, kA, 0, 0);  // preempted; nothing more of it
  Feed({.time_ns = 5'000, .tid = kPid, .cpu = 1,
        .payload = format::SchedWakeup{.woken_tid = kA, .target_cpu = 1, .is_new = true}});
  Switch(5'100, 1, 0, kA, 0);  // a new thread with its tid
  timeline_.Finish(10'000);
  const std::vector<Seen> a = Of(kA);
  ASSERT_GE(a.size(), 2u);
  EXPECT_EQ(a[0].state, ThreadState::kRunning);
  EXPECT_EQ(a[0].end, 50u);
  for (const Seen& seen : a) {
    EXPECT_FALSE(seen.begin < 5'000 && seen.end > 50) << "a wait of the exited thread";
  }
  EXPECT_EQ(a.back().state, ThreadState::kRunning);
  EXPECT_EQ(a.back().begin, 5'100u);
  EXPECT_EQ(a.back().end, 10'000u);
}

// b slept most of the time a waited, woke, exited, and woke a on its way
// out (a join): what b was doing is its own wait, known after its exit.
TEST_F(TimelineTest, AWakerThatExitedSaysWhatItDidAndOwnWaitsOutweighASample) {
  Switch(1'000, 0, 0, kA, 0);
  Switch(1'000, 1, 0, kB, 0);
  Feed({.time_ns = 1'500, .tid = kB, .cpu = 1, .payload = format::CpuSample{}}, 5);
  Switch(2'000, 0, kA, 0, 1);  // a waits for b
  Switch(3'000, 1, kB, 0, 1);  // b sleeps 27 µs
  Wake(30'000, 0, kB, 1, WakerContext::kTimer);
  Switch(30'500, 1, 0, kB, 0);
  Feed({.time_ns = 30'500, .tid = kB, .cpu = 1,
        .payload = format::OffCpu{.duration_ns = 27'500, .runq_ns = 500, .prev_state = 1}}, 9);
  Feed({.time_ns = 31'000, .tid = kB, .cpu = 1, .payload = format::ThreadExit{.pid = kPid}});
  Wake(31'500, kB, kA, 0);
  Switch(32'000, 0, 0, kA, 0);
  Feed({.time_ns = 32'000, .tid = kA, .cpu = 0, .payload = format::OffCpu{.prev_state = 1}}, 7);
  const std::vector<Seen> a = Of(kA);
  ASSERT_GE(a.size(), 2u);
  EXPECT_EQ(a[1].state, ThreadState::kBlocked);
  EXPECT_EQ(a[1].wake_tid, kB);
  EXPECT_EQ(a[1].doing, 9u);  // its sleep, not the sample at 1.5 µs
  EXPECT_TRUE(a[1].doing_off_cpu);
}

// A queue for a lock: a and b wait while c holds it; c lets a go, and a
// hands it to b. b's waker is a, itself waiting until c woke it.
TEST_F(TimelineTest, AWakerThatWaitedItselfSaysWhoEndedItsWait) {
  constexpr uint32_t kC = 103;
  Feed({.tid = kC, .payload = format::ThreadInfo{.pid = kPid, .name = "c"}});
  Switch(1'000, 0, 0, kA, 0);
  Switch(1'000, 1, 0, kB, 0);
  Switch(2'000, 0, kA, kC, 1);  // a waits; c runs, holding the lock
  Switch(3'000, 1, kB, 0, 1);   // b waits
  Wake(40'000, kC, kA, 0);
  Switch(40'500, 0, kC, kA, 1);
  Feed({.time_ns = 40'500, .tid = kA, .cpu = 0,
        .payload = format::OffCpu{.duration_ns = 38'500, .runq_ns = 500, .prev_state = 1}}, 9);
  Wake(41'000, kA, kB, 1);
  Switch(41'500, 1, 0, kB, 0);
  Feed({.time_ns = 41'500, .tid = kB, .cpu = 1, .payload = format::OffCpu{.prev_state = 1}}, 7);
  const std::vector<Seen> b = Of(kB);
  ASSERT_GE(b.size(), 2u);
  EXPECT_EQ(b[1].state, ThreadState::kBlocked);
  EXPECT_EQ(b[1].wake_tid, kA);
  EXPECT_EQ(b[1].doing, 9u);
  EXPECT_TRUE(b[1].doing_off_cpu);
  EXPECT_EQ(b[1].doing_woken_by, kC);
  // a's own waker was running, not waiting: no step further.
  const std::vector<Seen> a = Of(kA);
  ASSERT_GE(a.size(), 2u);
  EXPECT_EQ(a[1].wake_tid, kC);
  EXPECT_EQ(a[1].doing_woken_by, 0u);
}

// A child that execs is named after its new program, as the kernel names it.
TEST(ThreadDirectoryTest, AnExecRenamesTheProcessAndItsThread) {
  ThreadDirectory directory;
  directory.Observe({.tid = 50, .payload = format::ProcessInfo{.name = "forky"}});
  directory.Observe({.tid = 50, .payload = format::ProcessFork{.child_pid = 51, .child_tid = 51}});
  EXPECT_EQ(directory.ProcessNameOf(51), "forky");
  directory.Observe({.tid = 51, .payload = format::ProcessExec{.pid = 51,
                                                               .filename = "/usr/lib/a-long-helper-name"}});
  EXPECT_EQ(directory.ProcessNameOf(51), "a-long-helper-n");
  EXPECT_EQ(directory.ThreadName(51), "a-long-helper-n");
  EXPECT_EQ(directory.ProcessNameOf(50), "forky");
}

// A foreign process that exited before its name was read from /proc is
// named by its main thread's comm; without that thread, by its pid.
TEST(ThreadDirectoryTest, AGoneForeignProcessIsNamedByItsMainThread) {
  ThreadDirectory directory;
  directory.Observe({.tid = 500, .payload = format::ThreadInfo{.pid = 500, .name = "cc1plus",
                                                               .foreign = true}});
  directory.Observe({.tid = 501, .payload = format::ThreadInfo{.pid = 500, .name = "worker",
                                                               .foreign = true}});
  directory.Observe({.tid = 600, .payload = format::ThreadInfo{.pid = 600, .name = "yes",
                                                               .foreign = true,
                                                               .process_name = "yes"}});
  EXPECT_EQ(directory.ProcessNameOf(500), "cc1plus");
  EXPECT_EQ(directory.ProcessNameOf(501), "cc1plus");
  directory.Observe({.tid = 701, .payload = format::ThreadInfo{.pid = 700, .name = "pool-1",
                                                               .foreign = true}});
  EXPECT_EQ(directory.ProcessNameOf(701), "pid 700");
  EXPECT_EQ(directory.ProcessNameOf(600), "yes");
}

// A traced thread described as foreign after its process exited (traces
// written before louped kept exited targets apart) stays traced.
TEST(ThreadDirectoryTest, ATracedThreadStaysTracedWhenLaterCalledForeign) {
  ThreadDirectory directory;
  directory.Observe({.tid = 40, .payload = format::ProcessInfo{.name = "svc"}});
  directory.Observe({.tid = 41, .payload = format::ThreadInfo{.pid = 40, .name = "producer"}});
  directory.Observe({.tid = 41, .payload = format::ThreadInfo{.pid = 40, .name = "producer",
                                                              .foreign = true}});
  EXPECT_TRUE(directory.Traced(41));
  EXPECT_EQ(directory.ProcessNameOf(41), "svc");
  // A child it forked but does not follow is described as foreign: it is.
  directory.Observe({.tid = 40, .payload = format::ProcessFork{.child_pid = 45, .child_tid = 45}});
  directory.Observe({.tid = 45, .payload = format::ThreadInfo{.pid = 45, .name = "hogFIFO",
                                                              .foreign = true,
                                                              .process_name = "hogFIFO"}});
  EXPECT_FALSE(directory.Traced(45));
  EXPECT_EQ(directory.ProcessNameOf(45), "hogFIFO");
  EXPECT_EQ(directory.ThreadName(45), "hogFIFO");
}

}  // namespace
}  // namespace loupe::analysis
