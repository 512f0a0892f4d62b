// A thread asleep through a whole trace, as /proc tells it: its state, and
// its kernel stack's "function+0xoffset" lines turned back into addresses.
#include "daemon/session/asleep_all_along.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

#include "daemon/format/record.h"

namespace loupe::session {
namespace {

TEST(AsleepAllAlongTest, StackLinesBecomeAddressesByKallsyms) {
  const std::string kallsyms =
      "ffffffff81000100 T pipe_read\n"
      "ffffffff81000200 t vfs_read\n"
      "ffffffff81000300 T ksys_read\t[some_module]\n"
      "ffffffff81000999 T pipe_read\n";  // a second of that name: the first wins
  const std::vector<std::vector<std::string>> stacks = {
      {"pipe_read+0x60/0x90", "vfs_read+0x8/0x100", "ksys_read+0x1/0x2", "gone+0x1/0x2"},
      {"not a frame", "pipe_read+0xzz/0x1"}};
  const std::vector<std::vector<uint64_t>> addresses = KernelAddresses(stacks, kallsyms);
  ASSERT_EQ(addresses.size(), 2u);
  EXPECT_EQ(addresses[0],
            (std::vector<uint64_t>{0xffffffff81000160, 0xffffffff81000208, 0xffffffff81000301}));
  EXPECT_TRUE(addresses[1].empty());
  // Hidden addresses (kptr_restrict) place nothing.
  EXPECT_TRUE(KernelAddresses(stacks, "0000000000000000 T pipe_read\n")[0].empty());
}

TEST(AsleepAllAlongTest, StatesAreTheSwitchsTaskStates) {
  EXPECT_EQ(TaskStateOfLetter('S'), 0x1u);
  EXPECT_EQ(TaskStateOfLetter('D'), 0x2u);
  EXPECT_EQ(TaskStateOfLetter('T'), format::kTaskStopped);
  EXPECT_EQ(TaskStateOfLetter('R'), 0u);
}

// A real thread of this process blocked on a pipe reads as asleep (with
// its stack where /proc shows it: root); one running does not.
TEST(AsleepAllAlongTest, AThreadBlockedOnAPipeIsAsleep) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t reader_tid = 0;
  std::thread reader([&] {
    reader_tid = static_cast<pid_t>(syscall(SYS_gettid));
    char c;
    (void)!read(fds[0], &c, 1);
  });
  std::optional<Asleep> asleep;
  for (int i = 0; i < 200 && !asleep; ++i) {
    usleep(5'000);
    if (reader_tid != 0) asleep = ReadAsleep(getpid(), reader_tid, /*with_kernel_stack=*/true);
  }
  ASSERT_TRUE(asleep.has_value());
  EXPECT_EQ(asleep->prev_state, 0x1u);
  if (geteuid() == 0) {
    ASSERT_FALSE(asleep->kernel_frames.empty());
    EXPECT_NE(asleep->kernel_frames.front().find("+0x"), std::string::npos)
        << asleep->kernel_frames.front();
  }
  // Withheld from a caller other than root: the state, not the stack.
  const std::optional<Asleep> unprivileged = ReadAsleep(getpid(), reader_tid, false);
  ASSERT_TRUE(unprivileged.has_value());
  EXPECT_EQ(unprivileged->prev_state, 0x1u);
  EXPECT_TRUE(unprivileged->kernel_frames.empty());
  EXPECT_FALSE(ReadAsleep(getpid(), static_cast<uint32_t>(syscall(SYS_gettid)), true).has_value())
      << "this thread runs";
  (void)!write(fds[1], "x", 1);
  reader.join();
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace loupe::session
