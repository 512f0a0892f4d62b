// Threads of untraced processes are described once per segment, before
// their first switch or wakeup of a target there, and again when their name
// changes.
#include "daemon/session/foreign_threads.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace loupe::session {
namespace {

constexpr uint32_t kTarget = 100;

OwnedEvent Switch(uint32_t prev_tid, uint32_t prev_tgid, std::string prev_comm,
                  uint32_t next_tid, uint32_t next_tgid, std::string next_comm) {
  OwnedEvent event;
  event.record = {.time_ns = 1000, .tid = prev_tid, .payload = format::SchedSwitch{next_tid, 0}};
  event.prev_tgid = prev_tgid;
  event.next_tgid = next_tgid;
  event.prev_comm.Assign(prev_comm);
  event.next_comm.Assign(next_comm);
  return event;
}

OwnedEvent Wakeup(uint32_t waker_tid, uint32_t waker_tgid, std::string waker_comm,
                  uint32_t woken_tid) {
  OwnedEvent event;
  event.record = {
      .time_ns = 2000, .tid = waker_tid, .cpu = 1, .payload = format::SchedWakeup{woken_tid}};
  event.prev_tgid = waker_tgid;
  event.next_tgid = kTarget;
  event.prev_comm.Assign(waker_comm);
  return event;
}

class ForeignThreadsTest : public ::testing::Test {
 protected:
  std::vector<uint32_t> lookups_;
  ForeignThreads foreign_{[](uint32_t tgid) { return tgid == kTarget; },
                          [this](uint32_t pid) {
                            lookups_.push_back(pid);
                            return pid == 500 ? std::string("compressor") : std::string();
                          }};
};

TEST_F(ForeignThreadsTest, DescribedOncePerSegmentAndOnRename) {
  std::vector<OwnedEvent> made = foreign_.Describe(Switch(101, kTarget, "", 501, 500, "bg_compress"));
  ASSERT_EQ(made.size(), 1u);
  const format::Record& record = made[0].View();
  const auto& info = std::get<format::ThreadInfo>(record.payload);
  EXPECT_EQ(record.tid, 501u);
  EXPECT_EQ(record.time_ns, 1000u);
  EXPECT_EQ(info.pid, 500u);
  EXPECT_TRUE(info.foreign);
  EXPECT_EQ(info.name, "bg_compress");
  EXPECT_EQ(info.process_name, "compressor");

  EXPECT_TRUE(foreign_.Describe(Switch(501, 500, "bg_compress", 101, kTarget, "")).empty());
  made = foreign_.Describe(Switch(501, 500, "bg_idle", 101, kTarget, ""));
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].text, "bg_idle");
  EXPECT_EQ(lookups_, std::vector<uint32_t>{500});  // the process name is cached

  // The next segment knows nobody; the last switch's sides go to its preamble.
  const std::vector<OwnedEvent> preamble = foreign_.StartSegment();
  ASSERT_EQ(preamble.size(), 1u);
  EXPECT_EQ(preamble[0].record.tid, 501u);
  EXPECT_TRUE(foreign_.Describe(Switch(501, 500, "bg_idle", 101, kTarget, "")).empty());
  EXPECT_EQ(foreign_.Describe(Switch(502, 500, "bg_2", 503, 500, "bg_3")).size(), 2u);
}

TEST_F(ForeignThreadsTest, TargetsIdleAndUnnamedSidesAreNotDescribed) {
  // BPF leaves the name empty for what it took for a target.
  EXPECT_TRUE(foreign_.Describe(Switch(101, kTarget, "", 0, 0, "")).empty());
  EXPECT_TRUE(foreign_.Describe(Switch(0, 0, "swapper/0", 101, kTarget, "")).empty());
  EXPECT_TRUE(foreign_.Describe(Switch(102, 600, "", 101, kTarget, "")).empty());
  const std::vector<OwnedEvent> made =
      foreign_.Describe(Switch(101, kTarget, "", 701, 700, "gone"));
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].value_text(), "");  // the process is gone
}

// A process that only ever wakes a target (it releases a lock the target
// waits for, and never holds a CPU the target wants) is named all the same.
TEST_F(ForeignThreadsTest, AWakerOfATargetIsDescribedOnceAndInTheNextPreamble) {
  std::vector<OwnedEvent> made = foreign_.Describe(Wakeup(501, 500, "backup", 101));
  ASSERT_EQ(made.size(), 1u);
  const format::Record& record = made[0].View();
  EXPECT_EQ(record.tid, 501u);
  EXPECT_EQ(record.time_ns, 2000u);
  EXPECT_EQ(record.cpu, 1u);  // the wakeup's
  EXPECT_EQ(std::get<format::ThreadInfo>(record.payload).pid, 500u);
  EXPECT_TRUE(std::get<format::ThreadInfo>(record.payload).foreign);
  EXPECT_EQ(made[0].text, "backup");
  EXPECT_EQ(made[0].value_text(), "compressor");
  EXPECT_TRUE(foreign_.Describe(Wakeup(501, 500, "backup", 102)).empty());
  // BPF names no target waker and no interrupted task.
  EXPECT_TRUE(foreign_.Describe(Wakeup(102, kTarget, "", 101)).empty());
  EXPECT_TRUE(foreign_.Describe(Wakeup(0, 0, "", 101)).empty());

  const std::vector<OwnedEvent> preamble = foreign_.StartSegment();
  ASSERT_EQ(preamble.size(), 1u);
  EXPECT_EQ(preamble[0].record.tid, 501u);
}

TEST(ForeignThreadsProcTest, ReadsTheProcessNameFromProc) {
  EXPECT_EQ(ForeignThreads::ReadProcComm(static_cast<uint32_t>(getpid())), "daemon_unit_tes");
  EXPECT_EQ(ForeignThreads::ReadProcComm(0), "");
}

}  // namespace
}  // namespace loupe::session
