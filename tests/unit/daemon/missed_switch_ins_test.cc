// Switch-ins the kernel did not report, placed from the second switch-out's
// own account of how long the thread had run.
#include "daemon/session/missed_switch_ins.h"

#include <gtest/gtest.h>

#include "tests/unit/daemon/switch_event.h"

namespace loupe::session {
namespace {

constexpr uint32_t kTarget = 100, kWorker = 101, kOtherWorker = 102;  // the target's threads
constexpr uint32_t kInit = 1, kTokio = 81;  // a thread whose switch-outs the tracepoint omits

OwnedEvent Switch(uint64_t time_ns, uint32_t prev_tid, uint32_t prev_tgid, uint32_t next_tid,
                  uint32_t next_tgid, uint32_t ran_ns, uint32_t prev_state = 0) {
  OwnedEvent event = testing::SwitchEvent(time_ns, prev_tid, prev_tgid, next_tid, next_tgid, prev_state);
  event.prev_ran_ns = ran_ns;
  if (next_tgid == kInit) event.next_comm.Assign("tokio-rt-worker");
  return event;
}

class MissedSwitchInsTest : public ::testing::Test {
 protected:
  MissedSwitchIns missed_{[](uint32_t tgid) { return tgid == kTarget; }};
};

TEST_F(MissedSwitchInsTest, ASecondSwitchOutPlacesTheMissingSwitchInByTheTimeRun) {
  EXPECT_FALSE(missed_.Observe(Switch(1'000, kWorker, kTarget, kTokio, kInit, 400)));
  // tokio -> worker at 3'500 was never reported; the worker ran 1'500 ns.
  ASSERT_TRUE(missed_.Observe(Switch(5'000, kWorker, kTarget, kTokio, kInit, 1'500)));
  EXPECT_EQ(missed_.inferred_time_ns(), 3'500u);
  OwnedEvent in;
  missed_.TakeInferred(&in);
  EXPECT_EQ(in.record.time_ns, 3'500u);
  EXPECT_EQ(in.record.tid, kTokio);
  EXPECT_EQ(in.prev_tgid, kInit);
  EXPECT_EQ(in.prev_comm.view(), "tokio-rt-worker");
  EXPECT_EQ(in.next_tgid, kTarget);
  const auto& change = std::get<format::SchedSwitch>(in.record.payload);
  EXPECT_EQ(change.next_tid, kWorker);
  EXPECT_EQ(change.prev_state, format::kSwitchInferred);
}

TEST_F(MissedSwitchInsTest, TheSwitchInIsNeverPlacedAfterWhatTheThreadRanMeanwhile) {
  EXPECT_FALSE(missed_.Observe(Switch(1'000, kWorker, kTarget, kTokio, kInit, 400)));
  OwnedEvent span;
  span.record = {.time_ns = 3'497, .tid = kWorker, .payload = format::SpanBegin{.span_id = 1}};
  EXPECT_FALSE(missed_.Observe(span));
  // The kernel's clock says 3'500, three nanoseconds after the span began:
  // placed just before the span, which arrived first and so would leave
  // the reorder buffer first at an equal time.
  ASSERT_TRUE(missed_.Observe(Switch(5'000, kWorker, kTarget, kTokio, kInit, 1'500)));
  EXPECT_EQ(missed_.inferred_time_ns(), 3'496u);
}

// A thread preempted, switched in unreported, then exiting: its exit record
// is its own, so the switch-in goes before it, not between it and the
// thread's last switch (a followed child that lived a few ms).
TEST_F(MissedSwitchInsTest, TheSwitchInGoesBeforeTheThreadsExit) {
  EXPECT_FALSE(missed_.Observe(Switch(1'000, kWorker, kTarget, kTokio, kInit, 400)));
  OwnedEvent exit;
  exit.record = {.time_ns = 3'000, .tid = kWorker, .payload = format::ThreadExit{.pid = kTarget}};
  EXPECT_FALSE(missed_.Observe(exit));
  // It ran 50 ns by its own clock, which would put the switch-in after the exit.
  ASSERT_TRUE(missed_.Observe(Switch(3'100, kWorker, kTarget, kTokio, kInit, 50, format::kTaskDead)));
  EXPECT_EQ(missed_.inferred_time_ns(), 2'999u);
}

TEST_F(MissedSwitchInsTest, NothingIsMadeWhereTheSwitchInWasReportedOrCannotBePlaced) {
  // Reported switch-in between the switch-outs.
  EXPECT_FALSE(missed_.Observe(Switch(1'000, kWorker, kTarget, kTokio, kInit, 400)));
  EXPECT_FALSE(missed_.Observe(Switch(2'000, kTokio, kInit, kWorker, kTarget, 0)));
  EXPECT_FALSE(missed_.Observe(Switch(3'000, kWorker, kTarget, kTokio, kInit, 1'000)));
  // Missing, but the kernel's account is unknown (0) or reaches back past
  // the previous switch-out.
  EXPECT_FALSE(missed_.Observe(Switch(5'000, kWorker, kTarget, kTokio, kInit, 0)));
  EXPECT_FALSE(missed_.Observe(Switch(6'000, kWorker, kTarget, kTokio, kInit, 1'500)));
  // The CPU was last seen going to another of the target's threads, whose
  // own switches are all reported: that one did not hand it over.
  EXPECT_FALSE(missed_.Observe(Switch(6'500, kTokio, kInit, kOtherWorker, kTarget, 0)));
  EXPECT_FALSE(missed_.Observe(Switch(8'000, kWorker, kTarget, kTokio, kInit, 500)));
}

// A new thread's first switch-in can be the one missing: it waited to run
// from its wakeup, as a switched-out thread does.
TEST_F(MissedSwitchInsTest, ANewThreadsFirstSwitchInIsPlacedToo) {
  OwnedEvent created;
  created.record = {.time_ns = 1'000,
                    .tid = kWorker,
                    .payload = format::SchedWakeup{.woken_tid = kOtherWorker, .is_new = true}};
  created.prev_tgid = kTarget;
  created.next_tgid = kTarget;
  EXPECT_FALSE(missed_.Observe(created));
  EXPECT_EQ(missed_.switched_out_threads(), 1u);
  ASSERT_TRUE(missed_.Observe(Switch(5'000, kOtherWorker, kTarget, kTokio, kInit, 2'000, 1)));
  EXPECT_EQ(missed_.inferred_time_ns(), 3'000u);
  // Reported (on cpu 1), it is forgotten at its switch-in: its switch-out
  // on cpu 0, where tokio runs, places nothing, though it would were the
  // thread still waiting since its wakeup (9'000 - 6'000 > 2'500).
  created.record.time_ns = 6'000;
  EXPECT_FALSE(missed_.Observe(created));
  OwnedEvent reported = Switch(6'500, kTokio, kInit, kOtherWorker, kTarget, 0);
  reported.record.cpu = 1;
  EXPECT_FALSE(missed_.Observe(reported));
  EXPECT_FALSE(missed_.Observe(Switch(9'000, kOtherWorker, kTarget, kTokio, kInit, 2'500)));
}

OwnedEvent Exec(uint64_t time_ns, uint32_t tid, uint32_t ran_ns) {
  OwnedEvent event;
  event.record = {.time_ns = time_ns, .tid = tid,
                  .payload = format::ProcessExec{.pid = kTarget, .old_tid = tid}};
  event.prev_tgid = kTarget;
  event.prev_ran_ns = ran_ns;
  return event;
}

// An exec is the thread's own: its account of the time run places the
// switch-in as a switch-out's does (a process dropped at its exec has none).
TEST_F(MissedSwitchInsTest, AnExecPlacesTheSwitchInOfTheThreadThatCalledIt) {
  EXPECT_FALSE(missed_.Observe(Switch(1'000, kTarget, kTarget, kTokio, kInit, 400)));
  ASSERT_TRUE(missed_.Observe(Exec(5'000, kTarget, 1'500)));
  EXPECT_EQ(missed_.inferred_time_ns(), 3'500u);
  OwnedEvent in;
  missed_.TakeInferred(&in);
  EXPECT_EQ(in.record.tid, kTokio);
  EXPECT_EQ(std::get<format::SchedSwitch>(in.record.payload).next_tid, kTarget);
  // Placed once: its next switch-out finds it switched in.
  EXPECT_FALSE(missed_.Observe(Switch(9'000, kTarget, kTarget, kTokio, kInit, 5'000)));

  // The run queue's clock not brought up to date since it arrived (0): it
  // ran before its exec, at least.
  EXPECT_FALSE(missed_.Observe(Switch(9'500, kTokio, kInit, kTarget, kTarget, 0)));
  EXPECT_FALSE(missed_.Observe(Switch(10'000, kTarget, kTarget, kTokio, kInit, 400)));
  ASSERT_TRUE(missed_.Observe(Exec(12'000, kTarget, 0)));
  EXPECT_EQ(missed_.inferred_time_ns(), 11'999u);

  // Switched in as reported: nothing to place.
  EXPECT_FALSE(missed_.Observe(Switch(13'000, kTarget, kTarget, kTokio, kInit, 400)));
  EXPECT_FALSE(missed_.Observe(Switch(14'000, kTokio, kInit, kTarget, kTarget, 0)));
  EXPECT_FALSE(missed_.Observe(Exec(15'000, kTarget, 200)));
}

TEST_F(MissedSwitchInsTest, AnExitedThreadIsForgotten) {
  EXPECT_FALSE(missed_.Observe(Switch(1'000, kWorker, kTarget, kTokio, kInit, 400, format::kTaskDead)));
  EXPECT_EQ(missed_.switched_out_threads(), 0u);
  // Its tid reused by a new thread: that one's first switch-out begins afresh.
  EXPECT_FALSE(missed_.Observe(Switch(9'000, kWorker, kTarget, kTokio, kInit, 7'000)));
}

}  // namespace
}  // namespace loupe::session
