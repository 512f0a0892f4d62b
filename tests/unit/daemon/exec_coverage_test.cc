// Whether a target's probes still fire after it calls exec, on real files
// (the plan's sites are matched to programs by inode, as the kernel does).
#include "daemon/session/exec_coverage.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace loupe::session {
namespace {

constexpr uint32_t kPid = 700, kWorker = 701;

class ExecCoverageTest : public ::testing::Test {
 protected:
  ExecCoverageTest() {
    for (const std::string& file : {service_, other_, libc_}) std::ofstream(file) << file;
    // The service's own sites and libc's, placed for kPid.
    for (const std::string& file : {service_, libc_}) {
      plan_.attachments.push_back({.path = file, .pid = kPid});
    }
  }
  ExecCoverage Coverage(bool system_wide) {
    return ExecCoverage(plan_, system_wide, {kPid}, [this](uint32_t) { return running_; });
  }

  testing::TempDir dir_;
  const std::string service_ = dir_.File("service"), other_ = dir_.File("other"),
                    libc_ = dir_.File("libc.so.6");
  probes::ProbePlan plan_;
  std::string running_ = service_;
};

TEST_F(ExecCoverageTest, TheMainThreadRunningTheSameProgramAgainKeepsItsProbes) {
  ExecCoverage coverage = Coverage(/*system_wide=*/false);
  EXPECT_EQ(coverage.OnExec(kPid, kPid), std::nullopt);
  EXPECT_EQ(coverage.OnExec(kPid, 0), std::nullopt);  // an older trace's exec: tid unknown
}

TEST_F(ExecCoverageTest, AnotherThreadsExecEndsTheThreadPerPidProbesWerePlacedFor) {
  ExecCoverage per_pid = Coverage(/*system_wide=*/false);
  const std::optional<std::string> said = per_pid.OnExec(kPid, kWorker);
  ASSERT_TRUE(said.has_value());
  EXPECT_NE(said->find("thread 701 called exec"), std::string::npos) << *said;
  EXPECT_NE(said->find("not traced (attach again)"), std::string::npos) << *said;
  // Probes for every process filter by process, which the exec keeps.
  EXPECT_EQ(Coverage(/*system_wide=*/true).OnExec(kPid, kWorker), std::nullopt);
}

TEST_F(ExecCoverageTest, AnotherProgramHasNoProbesOfItsOwn) {
  ExecCoverage coverage = Coverage(/*system_wide=*/true);
  running_ = other_;
  const std::optional<std::string> said = coverage.OnExec(kPid, kPid);
  ASSERT_TRUE(said.has_value());
  EXPECT_NE(said->find("exec into another program (" + other_ + ")"), std::string::npos) << *said;
  // Said once: from then on it is the program it runs.
  EXPECT_EQ(coverage.OnExec(kPid, kPid), std::nullopt);
}

// /proc/PID/exe is a link: the note names the program it points at.
TEST_F(ExecCoverageTest, TheNoteNamesTheProgramNotTheLink) {
  const std::string link = dir_.File("exe");
  std::filesystem::create_symlink(service_, link);
  running_ = link;
  ExecCoverage coverage = Coverage(/*system_wide=*/true);
  std::filesystem::remove(link);
  std::filesystem::create_symlink(other_, link);
  const std::optional<std::string> said = coverage.OnExec(kPid, kPid);
  ASSERT_TRUE(said.has_value());
  EXPECT_NE(said->find("(" + other_ + ")"), std::string::npos) << *said;
}

TEST_F(ExecCoverageTest, NothingIsSaidWhereNoProbeWasPlaced) {
  plan_.attachments.clear();
  running_ = other_;
  EXPECT_EQ(Coverage(false).OnExec(kPid, kWorker), std::nullopt);
  // Probes only in a library: a new program maps the same library, probed again.
  plan_.attachments.push_back({.path = libc_, .pid = kPid});
  running_ = service_;
  ExecCoverage libc_only = Coverage(true);
  running_ = other_;
  EXPECT_EQ(libc_only.OnExec(kPid, kPid), std::nullopt);
}

}  // namespace
}  // namespace loupe::session
