// Off-CPU intervals from hand-built switch and wakeup events, replayed in
// time order as the session releases them.
#include "daemon/session/offcpu_tracker.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/unit/daemon/switch_event.h"

namespace loupe::session {
namespace {

constexpr uint32_t kTarget = 100;  // tgid; its threads are 101, 102
constexpr uint32_t kOther = 500;
constexpr uint32_t kSleeping = 1;  // TASK_INTERRUPTIBLE

OwnedEvent Switch(uint64_t time_ns, uint32_t prev_tid, uint32_t prev_tgid, uint32_t next_tid,
                  uint32_t next_tgid, uint32_t prev_state) {
  OwnedEvent event = testing::SwitchEvent(time_ns, prev_tid, prev_tgid, next_tid, next_tgid, prev_state);
  if (prev_tgid == kTarget) {
    event.frames = {0x10, 0x20};
    event.user_depth = 1;
  }
  return event;
}

OwnedEvent Wakeup(uint64_t time_ns, uint32_t waker_tid, uint32_t woken_tid) {
  OwnedEvent event;
  event.record = {.time_ns = time_ns,
                  .tid = waker_tid,
                  .cpu = 1,
                  .payload = format::SchedWakeup{.woken_tid = woken_tid}};
  event.next_tgid = kTarget;
  return event;
}

class OffCpuTrackerTest : public ::testing::Test {
 protected:
  // The off-CPU intervals the tracker derives from `events`.
  std::vector<OwnedEvent> Replay(std::vector<OwnedEvent> events) {
    std::vector<OwnedEvent> intervals;
    for (OwnedEvent& event : events) {
      OwnedEvent made;
      if (tracker_.Observe(event, &made)) intervals.push_back(std::move(made));
    }
    return intervals;
  }
  OffCpuTracker tracker_{[](uint32_t tgid) { return tgid == kTarget; }};
};

TEST_F(OffCpuTrackerTest, SleepThenWakeup) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 501, kOther, kSleeping));
  events.push_back(Wakeup(5000, 102, 101));
  events.push_back(Switch(7000, 501, kOther, 101, kTarget, 0));
  const std::vector<OwnedEvent> intervals = Replay(std::move(events));
  ASSERT_EQ(intervals.size(), 1u);
  const auto& off = std::get<format::OffCpu>(intervals[0].record.payload);
  EXPECT_EQ(intervals[0].record.tid, 101u);
  EXPECT_EQ(intervals[0].record.time_ns, 7000u);
  EXPECT_EQ(off.duration_ns, 6000u);
  EXPECT_EQ(off.runq_ns, 2000u);
  EXPECT_EQ(off.waker_tid, 102u);
  EXPECT_EQ(off.prev_state, kSleeping);
  EXPECT_EQ(intervals[0].frames, (std::vector<uint64_t>{0x10, 0x20}));
  EXPECT_EQ(intervals[0].user_depth, 1u);
  EXPECT_EQ(tracker_.tracked_threads(), 0u);
}

// The waker ran on another CPU while the thread was still switching out:
// runnable from the switch-out, and the waker is still its waker.
TEST_F(OffCpuTrackerTest, WakeupBeforeTheSwitchOutCounts) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 501, kOther, 101, kTarget, 0));  // switch-in
  events.push_back(Wakeup(3000, 102, 101));
  events.push_back(Switch(3100, 101, kTarget, 501, kOther, kSleeping));
  events.push_back(Switch(9100, 501, kOther, 101, kTarget, 0));
  const std::vector<OwnedEvent> intervals = Replay(std::move(events));
  ASSERT_EQ(intervals.size(), 1u);
  const auto& off = std::get<format::OffCpu>(intervals[0].record.payload);
  EXPECT_EQ(off.duration_ns, 6000u);
  EXPECT_EQ(off.runq_ns, 6000u);
  EXPECT_EQ(off.waker_tid, 102u);
}

// A wakeup from before the last switch-in belongs to an interval that has
// ended: the next sleep is not woken by it.
TEST_F(OffCpuTrackerTest, WakeupsBeforeTheLastSwitchInAreStale) {
  std::vector<OwnedEvent> events;
  events.push_back(Wakeup(500, 102, 101));
  events.push_back(Switch(1000, 501, kOther, 101, kTarget, 0));  // switch-in
  events.push_back(Switch(2000, 101, kTarget, 501, kOther, kSleeping));
  events.push_back(Switch(2500, 501, kOther, 101, kTarget, 0));  // no wakeup seen
  const std::vector<OwnedEvent> intervals = Replay(std::move(events));
  ASSERT_EQ(intervals.size(), 1u);
  const auto& off = std::get<format::OffCpu>(intervals[0].record.payload);
  EXPECT_EQ(off.duration_ns, 500u);
  EXPECT_EQ(off.runq_ns, 0u);
  EXPECT_EQ(off.waker_tid, 0u);
}

// Throttled by its CPU quota is preempted too: runnable, waiting for the quota.
TEST_F(OffCpuTrackerTest, PreemptedThreadIsRunnableThroughout) {
  for (const uint32_t state : {0u, format::kSwitchThrottled}) {
    std::vector<OwnedEvent> events;
    events.push_back(Switch(1000, 101, kTarget, 501, kOther, state));
    events.push_back(Switch(4000, 501, kOther, 101, kTarget, 0));
    const std::vector<OwnedEvent> intervals = Replay(std::move(events));
    ASSERT_EQ(intervals.size(), 1u);
    const auto& off = std::get<format::OffCpu>(intervals[0].record.payload);
    EXPECT_EQ(off.duration_ns, 3000u);
    EXPECT_EQ(off.runq_ns, 3000u) << "prev_state " << state;
    EXPECT_EQ(off.prev_state, state);
    EXPECT_EQ(off.waker_tid, 0u);
  }
}

// Switches between two untraced threads (recorded while a target waits)
// and migrations make no interval and disturb none.
TEST_F(OffCpuTrackerTest, ForeignSwitchesAndMigrationsPassThrough) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 501, kOther, 0));
  events.push_back(Switch(2000, 501, kOther, 502, kOther, 0));
  OwnedEvent migrate;
  migrate.record = {.time_ns = 2500, .tid = 101, .payload = format::SchedMigrate{0, 1}};
  migrate.prev_tgid = kTarget;
  events.push_back(std::move(migrate));
  events.push_back(Switch(3000, 502, kOther, 101, kTarget, 0));
  const std::vector<OwnedEvent> intervals = Replay(std::move(events));
  ASSERT_EQ(intervals.size(), 1u);
  EXPECT_EQ(std::get<format::OffCpu>(intervals[0].record.payload).runq_ns, 2000u);
}

// A thread switches out one last time after its exit event, in TASK_DEAD:
// nothing of it is kept, and a thread that reuses its tid starts afresh.
TEST_F(OffCpuTrackerTest, AnExitedThreadLeavesNothingBehind) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 501, kOther, kSleeping));
  events.push_back(Switch(2000, 501, kOther, 101, kTarget, 0));
  OwnedEvent exit;
  exit.record = {.time_ns = 3000, .tid = 101, .cpu = 0, .payload = format::ThreadExit{}};
  events.push_back(std::move(exit));
  events.push_back(Switch(3100, 101, kTarget, 501, kOther, format::kTaskDead));
  // Much later, a new thread of the target gets tid 101 and runs.
  events.push_back(Switch(900'000, 501, kOther, 101, kTarget, 0));
  const std::vector<OwnedEvent> intervals = Replay(std::move(events));
  ASSERT_EQ(intervals.size(), 1u);  // the first sleep only
  EXPECT_EQ(intervals[0].record.time_ns, 2000u);
  EXPECT_EQ(tracker_.kept_threads(), 1u);  // the new thread, seen running; nothing of the old
  EXPECT_TRUE(tracker_.Seen(101));
  EXPECT_EQ(tracker_.tracked_threads(), 0u);
}

// On its way out a thread is preempted after its exit event; meanwhile its
// process's last thread exits, so the process is no target at its last
// switch. That switch still ends it: at the trace's end it waits for
// nothing (it used to get a wait from its preemption to the end).
TEST_F(OffCpuTrackerTest, AThreadPreemptedOnItsWayOutLeavesNoWaitAtTheEnd) {
  bool target = true;
  OffCpuTracker tracker([&](uint32_t tgid) { return tgid == kTarget && target; });
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 501, kOther, 101, kTarget, 0));
  OwnedEvent exit;
  exit.record = {.time_ns = 2000, .tid = 101, .cpu = 0, .payload = format::ThreadExit{}};
  events.push_back(std::move(exit));
  events.push_back(Switch(2100, 101, kTarget, 501, kOther, 0));  // preempted
  events.push_back(Switch(3000, 501, kOther, 101, kTarget, 0));
  events.push_back(Switch(3500, 101, kTarget, 501, kOther, 0));  // again; its switch-in is lost
  OwnedEvent made;
  size_t intervals = 0;
  for (OwnedEvent& event : events) intervals += tracker.Observe(event, &made);
  EXPECT_EQ(intervals, 1u);  // the first preemption
  target = false;  // the process's last thread exited
  OwnedEvent dead = Switch(4000, 101, kTarget, 501, kOther, format::kTaskDead);
  EXPECT_FALSE(tracker.Observe(dead, &made));
  EXPECT_FALSE(tracker.TakeUnended(90'000, &made));
  EXPECT_EQ(tracker.kept_threads(), 0u);

  // Its last switch never recorded: still no wait at the end.
  OffCpuTracker lost([](uint32_t tgid) { return tgid == kTarget; });
  OwnedEvent exit_again;
  exit_again.record = {.time_ns = 2000, .tid = 102, .cpu = 0, .payload = format::ThreadExit{}};
  lost.Observe(exit_again, &made);
  OwnedEvent preempted = Switch(2100, 102, kTarget, 501, kOther, 0);
  lost.Observe(preempted, &made);
  EXPECT_FALSE(lost.TakeUnended(90'000, &made));
}

// Preempted, then switched in by a switch the tracepoint did not report
// and never switched out again while traced (its process dropped at an
// exec, or the trace ended while it ran): its own records say it runs, so
// its wait ends at the first of them, not when tracing stops.
TEST_F(OffCpuTrackerTest, ARecordOfItsOwnEndsTheWaitOfAThreadSwitchedInUnreported) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 501, kOther, 0));  // preempted
  OwnedEvent sample;
  sample.record = {.time_ns = 4000, .tid = 101, .cpu = 1, .payload = format::CpuSample{}};
  sample.prev_tgid = kTarget;
  events.push_back(std::move(sample));
  OwnedEvent span;
  span.record = {.time_ns = 5000, .tid = 101, .cpu = 1, .payload = format::SpanBegin{.span_id = 1}};
  events.push_back(std::move(span));
  // The switch-in placed late, from the thread's next switch-out.
  events.push_back(Switch(6000, 501, kOther, 101, kTarget, format::kSwitchInferred));
  const std::vector<OwnedEvent> intervals = Replay(std::move(events));
  ASSERT_EQ(intervals.size(), 1u);
  EXPECT_EQ(intervals[0].record.time_ns, 4000u);
  EXPECT_EQ(intervals[0].record.cpu, 1u);
  const auto& off = std::get<format::OffCpu>(intervals[0].record.payload);
  EXPECT_EQ(off.duration_ns, 3000u);
  EXPECT_EQ(off.runq_ns, 3000u);  // preempted: runnable all along
  EXPECT_EQ(intervals[0].frames, (std::vector<uint64_t>{0x10, 0x20}));
  OwnedEvent none;
  EXPECT_FALSE(tracker_.TakeUnended(90'000, &none));

  // Its exit too: the wait is written, not dropped with the thread.
  std::vector<OwnedEvent> exiting;
  exiting.push_back(Switch(10'000, 102, kTarget, 501, kOther, kSleeping));
  exiting.push_back(Wakeup(11'000, 501, 102));
  OwnedEvent exit;
  exit.record = {.time_ns = 12'000, .tid = 102, .cpu = 0, .payload = format::ThreadExit{}};
  exiting.push_back(std::move(exit));
  const std::vector<OwnedEvent> waits = Replay(std::move(exiting));
  ASSERT_EQ(waits.size(), 1u);
  const auto& woken = std::get<format::OffCpu>(waits[0].record.payload);
  EXPECT_EQ(woken.duration_ns, 2000u);
  EXPECT_EQ(woken.runq_ns, 1000u);
  EXPECT_EQ(woken.waker_tid, 501u);
}

// An exec by a thread other than the main one: the record bears the main
// thread's tid, the wait is the calling thread's. A sample taken inside a
// switch (a non-maskable one, with cycles) is not the thread running again.
TEST_F(OffCpuTrackerTest, AnExecEndsItsCallersWaitAndASampleInTheSwitchDoesNot) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 102, kTarget, 501, kOther, 0));  // preempted
  OwnedEvent exec;
  exec.record = {.time_ns = 8000, .tid = 100, .cpu = 0,
                 .payload = format::ProcessExec{.pid = kTarget, .old_tid = 102}};
  events.push_back(std::move(exec));
  events.push_back(Switch(10'000, 101, kTarget, 501, kOther, kSleeping));
  OwnedEvent in_switch;
  in_switch.record = {.time_ns = 10'004, .tid = 101, .cpu = 0, .payload = format::CpuSample{}};
  in_switch.prev_tgid = kTarget;
  events.push_back(std::move(in_switch));
  events.push_back(Switch(30'000, 501, kOther, 101, kTarget, 0));
  const std::vector<OwnedEvent> intervals = Replay(std::move(events));
  ASSERT_EQ(intervals.size(), 2u);
  EXPECT_EQ(intervals[0].record.tid, 102u);
  EXPECT_EQ(std::get<format::OffCpu>(intervals[0].record.payload).duration_ns, 7000u);
  EXPECT_EQ(intervals[1].record.tid, 101u);
  EXPECT_EQ(std::get<format::OffCpu>(intervals[1].record.payload).duration_ns, 20'000u);
}

// A switch-out inside a signal handler: the interrupted frame is exact, and
// stays so in the interval, so it is symbolized where the code was.
TEST_F(OffCpuTrackerTest, FramesASignalInterruptedStayExact) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 501, kOther, kSleeping));
  events.back().frames = {0x10, 0x20, 0x30};
  events.back().user_depth = 3;
  events.back().extras().exact_frames = {2};
  events.push_back(Switch(7000, 501, kOther, 101, kTarget, 0));
  events.push_back(Switch(8000, 101, kTarget, 501, kOther, kSleeping));  // no signal frame now
  events.push_back(Switch(9000, 501, kOther, 101, kTarget, 0));
  const std::vector<OwnedEvent> intervals = Replay(std::move(events));
  ASSERT_EQ(intervals.size(), 2u);
  EXPECT_EQ(std::vector<uint16_t>(intervals[0].exact_frames().begin(),
                                  intervals[0].exact_frames().end()),
            (std::vector<uint16_t>{2}));
  EXPECT_TRUE(intervals[1].exact_frames().empty());
}

// Tracing stops while 101 sleeps (woken but not yet run) and 102 sleeps
// unwoken: each gets its wait so far, with its switch-out stack, ending when
// tracing stopped; a thread on the CPU then gets nothing.
TEST_F(OffCpuTrackerTest, ThreadsStillWaitingWhenTracingStopsGetTheirWaitSoFar) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 102, kTarget, kSleeping));
  events.push_back(Switch(2000, 102, kTarget, 501, kOther, kSleeping));
  events.push_back(Wakeup(6000, 501, 101));
  events.push_back(Switch(7000, 501, kOther, 103, kTarget, 0));  // 103 runs at the end
  EXPECT_TRUE(Replay(std::move(events)).empty());  // no thread came back
  std::map<uint32_t, OwnedEvent> unended;
  for (OwnedEvent made; tracker_.TakeUnended(10'000, &made);) {
    unended[made.record.tid] = std::move(made);
  }
  ASSERT_EQ(unended.size(), 2u);
  const auto& woken = std::get<format::OffCpu>(unended[101].record.payload);
  EXPECT_EQ(unended[101].record.time_ns, 10'000u);
  EXPECT_EQ(woken.duration_ns, 9000u);
  EXPECT_EQ(woken.runq_ns, 4000u);
  EXPECT_EQ(woken.waker_tid, 501u);
  EXPECT_EQ(unended[101].prev_tgid, kTarget);
  EXPECT_EQ(unended[101].frames, (std::vector<uint64_t>{0x10, 0x20}));
  const auto& asleep = std::get<format::OffCpu>(unended[102].record.payload);
  EXPECT_EQ(asleep.duration_ns, 8000u);
  EXPECT_EQ(asleep.runq_ns, 0u);
  EXPECT_EQ(asleep.waker_tid, 0u);
  EXPECT_EQ(asleep.prev_state, kSleeping);
  EXPECT_EQ(tracker_.tracked_threads(), 0u);
  OwnedEvent none;
  EXPECT_FALSE(tracker_.TakeUnended(10'000, &none));
}

// Threads read asleep right after recording began (at 1000): 101, read at
// 3000, woken and switched in after; 102, read at 3000 too, switched in at
// 2000 (it ran before the read: that sleep is a later one, whose switch-out
// is in the trace); 103, never switched in.
TEST_F(OffCpuTrackerTest, ASleepReadAtTheStartIsTheOneItsFirstSwitchInEnds) {
  for (uint32_t tid : {101u, 102u, 103u}) {
    OwnedEvent stack;
    stack.frames = {0x30 + tid, 0x40, 0xffffffff81000000};
    stack.user_depth = 2;
    tracker_.AsleepAtStart(tid, kTarget, kSleeping, 1000, 3000, stack);
    EXPECT_TRUE(stack.frames.empty()) << "taken";
  }
  EXPECT_TRUE(tracker_.Seen(101));
  EXPECT_EQ(tracker_.tracked_threads(), 3u);
  std::vector<OwnedEvent> events;
  events.push_back(Switch(2000, 501, kOther, 102, kTarget, 0));
  events.push_back(Switch(2500, 102, kTarget, 501, kOther, kSleeping));
  events.push_back(Wakeup(4000, 501, 101));
  events.push_back(Switch(4500, 501, kOther, 101, kTarget, 0));
  events.push_back(Wakeup(5000, 501, 102));
  events.push_back(Switch(6000, 501, kOther, 102, kTarget, 0));
  const std::vector<OwnedEvent> intervals = Replay(std::move(events));
  ASSERT_EQ(intervals.size(), 2u);
  EXPECT_EQ(intervals[0].record.tid, 101u);
  const auto& read = std::get<format::OffCpu>(intervals[0].record.payload);
  EXPECT_EQ(read.duration_ns, 3500u) << "from the start";
  EXPECT_EQ(read.runq_ns, 500u);
  EXPECT_EQ(read.waker_tid, 501u);
  EXPECT_EQ(read.prev_state, kSleeping);
  EXPECT_EQ(intervals[0].prev_tgid, kTarget);
  EXPECT_EQ(intervals[0].frames, (std::vector<uint64_t>{0x30 + 101, 0x40, 0xffffffff81000000}));
  EXPECT_EQ(intervals[0].user_depth, 2u);
  EXPECT_EQ(intervals[1].record.tid, 102u);
  EXPECT_EQ(std::get<format::OffCpu>(intervals[1].record.payload).duration_ns, 3500u)
      << "from its own switch-out";
  EXPECT_EQ(intervals[1].frames, (std::vector<uint64_t>{0x10, 0x20}));
  OwnedEvent unended;
  ASSERT_TRUE(tracker_.TakeUnended(9000, &unended));
  EXPECT_EQ(unended.record.tid, 103u);
  EXPECT_EQ(std::get<format::OffCpu>(unended.record.payload).duration_ns, 8000u);
  EXPECT_EQ(unended.frames, (std::vector<uint64_t>{0x30 + 103, 0x40, 0xffffffff81000000}));
  EXPECT_FALSE(tracker_.TakeUnended(9000, &unended));
}

// A record the thread made itself before the read ends no sleep read at the
// start (it ran, and the read is of a later sleep); one after does, as a
// switch-in would.
TEST_F(OffCpuTrackerTest, ARecordOfItsOwnBeforeTheReadEndsNoSleepReadAtTheStart) {
  for (uint32_t tid : {101u, 102u}) {
    OwnedEvent stack;
    stack.frames = {0x50};
    stack.user_depth = 1;
    tracker_.AsleepAtStart(tid, kTarget, kSleeping, 1000, 3000, stack);
  }
  std::vector<OwnedEvent> events;
  for (auto [tid, time] : {std::pair{101u, 2000u}, std::pair{102u, 3500u}}) {
    OwnedEvent sample;
    sample.record = {.time_ns = time, .tid = tid, .cpu = 0, .payload = format::CpuSample{}};
    sample.prev_tgid = kTarget;
    events.push_back(std::move(sample));
  }
  const std::vector<OwnedEvent> intervals = Replay(std::move(events));
  ASSERT_EQ(intervals.size(), 1u);
  EXPECT_EQ(intervals[0].record.tid, 102u);
  EXPECT_EQ(std::get<format::OffCpu>(intervals[0].record.payload).duration_ns, 2500u);
  OwnedEvent none;
  EXPECT_FALSE(tracker_.TakeUnended(9000, &none));
}

}  // namespace
}  // namespace loupe::session
