// Wakeups the kernel did not report, placed from the woken thread's run
// delay at its switch-outs, on hand-built events in drain order.
#include "daemon/session/missed_wakeups.h"

#include <gtest/gtest.h>

#include "tests/unit/daemon/switch_event.h"

namespace loupe::session {
namespace {

constexpr uint32_t kTarget = 100;  // tgid; its thread 101
constexpr uint32_t kOther = 500;
constexpr uint32_t kBlocked = 2;  // TASK_UNINTERRUPTIBLE

// A switch on CPU 1; the target's switch-out carries its run delay so far.
OwnedEvent Switch(uint64_t time_ns, uint32_t prev_tid, uint32_t prev_tgid, uint32_t next_tid,
                  uint32_t next_tgid, uint32_t prev_state, uint32_t run_delay_ns = 0) {
  OwnedEvent event = testing::SwitchEvent(time_ns, prev_tid, prev_tgid, next_tid, next_tgid, prev_state);
  event.record.cpu = 1;
  event.prev_run_delay_ns = run_delay_ns;
  return event;
}

OwnedEvent Wakeup(uint64_t time_ns, uint32_t woken_tid) {
  OwnedEvent event;
  event.record = {.time_ns = time_ns, .tid = 0, .cpu = 0,
                  .payload = format::SchedWakeup{.woken_tid = woken_tid,
                                                 .context = format::WakerContext::kSoftIrq}};
  event.next_tgid = kTarget;
  return event;
}

class MissedWakeupsTest : public ::testing::Test {
 protected:
  // Observes `events`; the wakeups made, in order.
  std::vector<OwnedEvent> Replay(std::vector<OwnedEvent> events, uint64_t switched_in_at = 0) {
    std::vector<OwnedEvent> made;
    for (const OwnedEvent& event : events) {
      if (missed_.Observe(event, switched_in_at)) {
        made.emplace_back();
        missed_.TakeInferred(&made.back());
        EXPECT_EQ(made.back().record.time_ns, missed_.inferred_time_ns());
      }
    }
    return made;
  }
  MissedWakeups missed_{[](uint32_t tgid) { return tgid == kTarget; }};
};

// Asleep from 1000, switched in at 9000 with no wakeup in the trace; its
// next switch-out says it was queued 2000 ns more than at the first.
TEST_F(MissedWakeupsTest, TheRunDelayGainedPlacesAWakeupTheTraceLacks) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 501, kOther, kBlocked, 50'000));
  events.push_back(Switch(9000, 501, kOther, 101, kTarget, 0));
  events.push_back(Switch(12'000, 101, kTarget, 501, kOther, kBlocked, 52'000));
  const std::vector<OwnedEvent> made = Replay(std::move(events));
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].record.time_ns, 7000u);
  EXPECT_EQ(made[0].record.tid, 0u) << "the waker is unknown";
  EXPECT_EQ(made[0].record.cpu, 1u);
  EXPECT_EQ(made[0].next_tgid, kTarget);
  const auto& wakeup = std::get<format::SchedWakeup>(made[0].record.payload);
  EXPECT_EQ(wakeup.woken_tid, 101u);
  EXPECT_EQ(wakeup.target_cpu, 1u);
  EXPECT_FALSE(wakeup.is_new);
  EXPECT_EQ(wakeup.context, format::WakerContext::kUnreported);
  EXPECT_EQ(missed_.threads(), 1u) << "its second sleep, until its next switch-out";
}

// The count is the kernel's low 32 bits: it wraps.
TEST_F(MissedWakeupsTest, TheCountWrapsAt32Bits) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 501, kOther, kBlocked, 0xffffff00u));
  events.push_back(Switch(9000, 501, kOther, 101, kTarget, 0));
  events.push_back(Switch(12'000, 101, kTarget, 501, kOther, 0, 0x100));
  const std::vector<OwnedEvent> made = Replay(std::move(events));
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].record.time_ns, 9000u - 0x200);
}

// A switch-in the kernel did not report either, placed by MissedSwitchIns.
TEST_F(MissedWakeupsTest, ASwitchInPlacedUnreportedEndsTheSleepToo) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 81, kOther, kBlocked, 50'000));
  const std::vector<OwnedEvent> none = Replay(std::move(events));
  EXPECT_TRUE(none.empty());
  std::vector<OwnedEvent> second;
  second.push_back(Switch(12'000, 101, kTarget, 501, kOther, kBlocked, 53'000));
  const std::vector<OwnedEvent> made = Replay(std::move(second), /*switched_in_at=*/9000);
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].record.time_ns, 6000u);
}

// Nothing is made where the trace has the wakeup (also one recorded before
// the switch-out it raced with), where the thread was preempted (queued
// from its switch-out, no wakeup), where the kernel keeps no count, or
// where the count says more than the wait held.
TEST_F(MissedWakeupsTest, NothingIsMadeWhereTheTraceOrTheCountsSayOtherwise) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 501, kOther, kBlocked, 50'000));
  events.push_back(Wakeup(5000, 101));
  events.push_back(Switch(9000, 501, kOther, 101, kTarget, 0));
  events.push_back(Wakeup(9500, 101));  // racing with the switch-out after
  events.push_back(Switch(10'000, 101, kTarget, 501, kOther, kBlocked, 54'000));
  events.push_back(Switch(11'000, 501, kOther, 101, kTarget, 0));
  events.push_back(Switch(12'000, 101, kTarget, 501, kOther, 0, 55'000));  // preempted
  events.push_back(Switch(13'000, 501, kOther, 101, kTarget, 0));
  events.push_back(Switch(14'000, 101, kTarget, 501, kOther, kBlocked, 0));  // no count
  events.push_back(Switch(15'000, 501, kOther, 101, kTarget, 0));
  events.push_back(Switch(16'000, 101, kTarget, 501, kOther, kBlocked, 60'000));
  events.push_back(Switch(17'000, 501, kOther, 101, kTarget, 0));
  events.push_back(Switch(18'000, 101, kTarget, 501, kOther, kBlocked, 61'000));  // 1000 > 1000 - 0
  EXPECT_TRUE(Replay(std::move(events)).empty());
}

// A wakeup after the sleep's own, before that sleep's switch-in was seen
// (unreported, placed only at the next switch-out), is the next sleep's:
// it raced with that switch-out.
TEST_F(MissedWakeupsTest, ASecondWakeupBeforeAnUnseenSwitchInIsTheNextSleeps) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 81, kOther, kBlocked, 50'000));
  events.push_back(Wakeup(4000, 101));
  events.push_back(Wakeup(11'900, 101));  // it runs, unreported, and is about to sleep again
  EXPECT_TRUE(Replay(std::move(events)).empty());
  std::vector<OwnedEvent> second;
  second.push_back(Switch(12'000, 101, kTarget, 501, kOther, kBlocked, 51'000));
  EXPECT_TRUE(Replay(std::move(second), /*switched_in_at=*/5000).empty());
  std::vector<OwnedEvent> third;
  third.push_back(Switch(13'000, 501, kOther, 101, kTarget, 0));
  third.push_back(Switch(14'000, 101, kTarget, 501, kOther, kBlocked, 51'500));
  EXPECT_TRUE(Replay(std::move(third)).empty()) << "its wakeup was the one at 11900";
}

// Records lost between: the thread arrived on its CPU after the switch-in
// seen (its switch-out says how long it ran), so the count holds two waits.
TEST_F(MissedWakeupsTest, AnArrivalAfterTheSwitchInSeenPlacesNothing) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 501, kOther, kBlocked, 50'000));
  events.push_back(Switch(9000, 501, kOther, 101, kTarget, 0));
  OwnedEvent out = Switch(2'000'000, 101, kTarget, 501, kOther, kBlocked, 52'000);
  out.prev_ran_ns = 1000;  // arrived at 1999000, long after 9000
  events.push_back(std::move(out));
  EXPECT_TRUE(Replay(std::move(events)).empty());
}

// A new thread, an exit or an exec ends what was kept of a tid: a thread
// that reuses it starts afresh.
TEST_F(MissedWakeupsTest, ANewThreadWithAnOldTidStartsAfresh) {
  std::vector<OwnedEvent> events;
  events.push_back(Switch(1000, 101, kTarget, 501, kOther, kBlocked, 50'000));
  OwnedEvent born;
  born.record = {.time_ns = 2000, .tid = 102, .cpu = 0,
                 .payload = format::SchedWakeup{.woken_tid = 101, .is_new = true}};
  born.next_tgid = kTarget;
  events.push_back(std::move(born));
  events.push_back(Switch(9000, 501, kOther, 101, kTarget, 0));
  events.push_back(Switch(12'000, 101, kTarget, 501, kOther, kBlocked, 900));
  EXPECT_TRUE(Replay(std::move(events)).empty());
  EXPECT_EQ(missed_.threads(), 1u) << "its own sleep from 12000";
  std::vector<OwnedEvent> exiting;
  OwnedEvent exit;
  exit.record = {.time_ns = 13'000, .tid = 101, .cpu = 0, .payload = format::ThreadExit{}};
  exiting.push_back(std::move(exit));
  EXPECT_TRUE(Replay(std::move(exiting)).empty());
  EXPECT_EQ(missed_.threads(), 0u);
}

}  // namespace
}  // namespace loupe::session
