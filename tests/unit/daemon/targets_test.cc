// What attach refuses before tracing anything: a thread's number given as a
// process (it would trace nothing and verify as complete), and a zombie.
#include "daemon/session/targets.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace loupe::session {
namespace {

TEST(TargetsTest, AThreadIsRefusedNamingItsProcess) {
  std::atomic<pid_t> tid = 0;
  std::atomic<bool> done = false;
  std::thread worker([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    while (!done) usleep(1000);
  });
  while (tid == 0) usleep(100);
  absl::StatusOr<Targets> targets = Targets::Resolve({static_cast<uint32_t>(tid.load())}, 0, 0, false);
  done = true;
  worker.join();
  ASSERT_FALSE(targets.ok());
  EXPECT_EQ(targets.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(targets.status().message().find(fmt::format("is a thread of process {}", getpid())),
            std::string_view::npos)
      << targets.status();
  EXPECT_TRUE(Targets::Resolve({static_cast<uint32_t>(getpid())}, 0, 0, false).ok());
}

// A process renamed (prctl PR_SET_NAME on its main thread) is described by
// its new name in the segments that follow; a worker's rename is its own.
TEST(TargetsTest, AMainThreadsRenameRenamesTheProcess) {
  constexpr uint32_t kPid = 500;
  ProcessIdentity process{.pid = kPid, .ns_pid = kPid, .ppid = 1, .name = "before"};
  process.threads[kPid] = {.tid = kPid, .ns_tid = kPid, .name = "before"};
  Targets targets({{kPid, process}});
  auto rename = [&](uint32_t tid, const std::string& name) {
    OwnedEvent event;
    event.record = {.time_ns = 1'000, .tid = tid, .payload = format::ThreadInfo{.pid = kPid}};
    event.text = name;
    targets.Track(event);
  };
  rename(kPid + 1, "worker");
  EXPECT_EQ(targets.processes().at(kPid).name, "before");
  rename(kPid, "after");
  EXPECT_EQ(targets.processes().at(kPid).name, "after");
  EXPECT_EQ(targets.processes().at(kPid).threads.at(kPid + 1).name, "worker");
}

TEST(TargetsTest, AZombieIsRefusedAsExited) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  siginfo_t info{};
  // Waited for without reaping: the child stays a zombie.
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  absl::StatusOr<Targets> targets = Targets::Resolve({static_cast<uint32_t>(child)}, 0, 0, false);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  ASSERT_FALSE(targets.ok());
  EXPECT_NE(targets.status().message().find("has exited"), std::string_view::npos)
      << targets.status();
}

// ptrace's rule: root traces anything; a user its own processes, and not
// one running with rights its user does not have (a setuid program).
TEST(TargetsTest, ACallerMayTraceItsOwnPlainProcessesOnly) {
  const ProcessIdentity own{.uid = 1000, .plain_user = true};
  const ProcessIdentity setuid{.uid = 1000, .plain_user = false};
  const ProcessIdentity other{.uid = 1001, .plain_user = true};
  EXPECT_TRUE(CallerMayTrace(1000, own));
  EXPECT_FALSE(CallerMayTrace(1000, setuid));
  EXPECT_FALSE(CallerMayTrace(1000, other));
  EXPECT_TRUE(CallerMayTrace(0, setuid));
  EXPECT_TRUE(CallerMayTrace(0, other));
}

}  // namespace
}  // namespace loupe::session
