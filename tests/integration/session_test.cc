// The session engine on real processes: sched and CPU-sampling sources,
// time order, off-CPU intervals, children, isolation between sessions,
// loss accounting with a ring that overflows, and bad targets.
#include "daemon/session/session.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fstream>
#include <set>

#include "daemon/format/loss_tally.h"
#include "tests/support/child_process.h"
#include "tests/support/elf_symbols.h"
#include "tests/support/privileged.h"
#include "tests/support/proc_counters.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_digest.h"

namespace loupe::session {
namespace {

using testing::ChildProcess;
using testing::DigestTrace;
using testing::TestProgram;
using testing::TraceDigest;

std::shared_ptr<spdlog::logger> QuietLog() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

SessionOptions Options(const std::string& dir, std::vector<uint32_t> pids) {
  SessionOptions options;
  options.pids = std::move(pids);
  options.writer.directory = dir;
  options.writer.session_id = "test";
  return options;
}

// Waits until the thread sleeps with counters that have stopped moving.
uint64_t SettledContextSwitches(pid_t pid, pid_t tid) {
  uint64_t previous = testing::ContextSwitches(pid, tid);
  while (true) {
    usleep(50'000);
    const uint64_t now = testing::ContextSwitches(pid, tid);
    if (now == previous) return now;
    previous = now;
  }
}

TEST(SessionTest, PingPongSwitchCountsMatchTheKernelExactly) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  ChildProcess program({TestProgram("pingpong"), "2000"});
  const std::vector<std::string> ready = program.ReadWords();
  ASSERT_EQ(ready.size(), 3u);
  const pid_t tid_a = std::stoi(ready[1]), tid_b = std::stoi(ready[2]);

  auto session =
      Session::Start(Options(dir.path(), {static_cast<uint32_t>(program.pid())}), QuietLog());
  ASSERT_TRUE(session.ok()) << session.status();
  const uint64_t before_a = SettledContextSwitches(program.pid(), tid_a);
  const uint64_t before_b = SettledContextSwitches(program.pid(), tid_b);
  program.WriteLine("go");
  ASSERT_EQ(program.ReadLine(), "done");
  const uint64_t after_a = SettledContextSwitches(program.pid(), tid_a);
  const uint64_t after_b = SettledContextSwitches(program.pid(), tid_b);
  ASSERT_TRUE((*session)->Stop().ok());

  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  EXPECT_TRUE(trace.time_ordered);
  EXPECT_GE(after_a - before_a, 2000u);
  EXPECT_EQ(trace.switch_outs.at(tid_a), after_a - before_a);
  EXPECT_EQ(trace.switch_outs.at(tid_b), after_b - before_b);

  for (pid_t tid : {tid_a, tid_b}) {
    const auto& intervals = trace.off_cpu.at(tid);
    EXPECT_GE(intervals.size(), 1999u);
    size_t with_runq = 0;
    for (const testing::OffCpuInterval& off : intervals) {
      EXPECT_GT(off.kernel_depth + off.user_depth, 0u) << "an off-CPU interval without a stack";
      EXPECT_LE(off.runq_ns, off.duration_ns);
      with_runq += off.runq_ns > 0;
    }
    EXPECT_GT(with_runq, intervals.size() / 2) << "run-queue latency missing";
  }
}

class CpuRatioTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(CpuRatioTest, SampleSplitFollowsTheWorkAndStacksReachMain) {
  LOUPE_REQUIRE_PRIVILEGES();
  const uint32_t hz = GetParam();
  // Long enough for the split's sampling error to be well inside 5 points.
  const double seconds = hz < 500 ? 10.0 : 3.0;
  testing::TempDir dir;
  const std::string binary = TestProgram("cpu_ratio");
  const auto functions = testing::FunctionRanges(binary);
  ASSERT_TRUE(functions.contains("hot_a") && functions.contains("main"));
  ChildProcess program({binary, std::to_string(seconds)});
  const std::vector<std::string> ready = program.ReadWords();
  ASSERT_EQ(ready.size(), 2u);
  const uint32_t tid = static_cast<uint32_t>(std::stoul(ready[1]));

  SessionOptions options = Options(dir.path(), {static_cast<uint32_t>(program.pid())});
  options.sources.sample_hz = hz;
  auto session = Session::Start(options, QuietLog());
  ASSERT_TRUE(session.ok()) << session.status();
  program.WriteLine("go");
  const std::vector<std::string> done = program.ReadWords();
  ASSERT_EQ(done.size(), 3u);
  const double measured_share_a = std::stod(done[1]);  // what the program timed
  const double cpu_seconds = std::stod(done[2]);       // samples follow CPU time
  ASSERT_TRUE((*session)->Stop().ok());

  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  const auto& samples = trace.user_samples.at(tid);
  EXPECT_GE(static_cast<double>(samples.size()), 0.85 * cpu_seconds * hz);
  uint64_t in_a = 0, in_b = 0, reaching_main = 0;
  for (const std::vector<uint64_t>& stack : samples) {
    ASSERT_FALSE(stack.empty());
    const bool a = functions.at("hot_a").Contains(stack[0]);
    const bool b = functions.at("hot_b").Contains(stack[0]);
    in_a += a;
    in_b += b;
    if (a || b) {
      reaching_main += std::any_of(stack.begin() + 1, stack.end(), [&](uint64_t frame) {
        return functions.at("main").Contains(frame);
      });
    }
  }
  ASSERT_GT(in_a + in_b, samples.size() * 9 / 10)
      << "first sample's innermost frame 0x" << std::hex << samples.front().front()
      << ", hot_a at 0x" << functions.at("hot_a").start;
  const double share_a = 100.0 * static_cast<double>(in_a) / static_cast<double>(in_a + in_b);
  EXPECT_NEAR(share_a, measured_share_a, 5.0);
  // A sample on a function's first instruction, before it pushes its frame
  // pointer, misses its caller: frame-pointer walking cannot do better.
  EXPECT_GE(reaching_main, (in_a + in_b) * 99 / 100) << "hot samples whose stack misses main";
}

INSTANTIATE_TEST_SUITE_P(Frequencies, CpuRatioTest, ::testing::Values(99u, 999u));

// Children forked after attach are traced with follow_children, not without.
class FollowChildrenTest : public ::testing::TestWithParam<bool> {};

TEST_P(FollowChildrenTest, ChildrenForkedAfterAttach) {
  LOUPE_REQUIRE_PRIVILEGES();
  const bool follow = GetParam();
  testing::TempDir dir;
  ChildProcess program({TestProgram("forker"), "3"});
  ASSERT_EQ(program.ReadWords().size(), 2u);
  SessionOptions options = Options(dir.path(), {static_cast<uint32_t>(program.pid())});
  options.sources.sample_hz = 999;
  options.sources.follow_children = follow;
  auto session = Session::Start(options, QuietLog());
  ASSERT_TRUE(session.ok()) << session.status();
  program.WriteLine("go");
  std::set<uint32_t> children;
  for (std::vector<std::string> words = program.ReadWords(); words.size() == 2;
       words = program.ReadWords()) {
    children.insert(static_cast<uint32_t>(std::stoul(words[1])));
  }
  ASSERT_EQ(children.size(), 3u);
  ASSERT_TRUE((*session)->Stop().ok());

  const TraceDigest trace = DigestTrace(dir.path());
  // Fresh children can yield a capped or junk-ended stack, rightly counted
  // as cut; no event may be dropped.
  ASSERT_TRUE(trace.problems.empty()) << testing::WhyIncomplete(trace);
  for (const auto& [what, count] : trace.losses) {
    EXPECT_TRUE(format::IsCutKey(what)) << "lost " << count << " " << what;
  }
  // A child may still appear as the thread a target was switched in after;
  // traced means its own samples, off-CPU intervals and exit are there.
  for (uint32_t child : children) {
    EXPECT_EQ(trace.sample_tids.contains(child), follow) << "child " << child;
    EXPECT_EQ(trace.off_cpu.contains(child), follow) << "child " << child;
    EXPECT_EQ(trace.exited_processes.contains(child), follow) << "child " << child;
    // Described where it appears, not only from the next segment on.
    EXPECT_EQ(trace.processes.contains(child), follow) << "child " << child;
  }
}

// Children that exist before attach are taken with follow_children, with
// their own descendants, as --follow-children promises.
TEST_P(FollowChildrenTest, ChildrenThatExistAlready) {
  LOUPE_REQUIRE_PRIVILEGES();
  const bool follow = GetParam();
  testing::TempDir dir;
  const std::string loop = "while :; do sleep 0.01; done";
  ChildProcess program({"/bin/sh", "-c", "sh -c '" + loop + "' & sh -c '" + loop + "' & wait"});
  std::vector<uint32_t> children;
  for (int tries = 0; tries < 100 && children.size() < 2; ++tries) {
    usleep(20'000);
    children.clear();
    for (uint32_t pid : Descendants(static_cast<uint32_t>(program.pid()))) {
      absl::StatusOr<ProcessIdentity> process = ReadProcess(pid);
      if (process.ok() && process->ppid == static_cast<uint32_t>(program.pid()) &&
          process->name == "sh") {
        children.push_back(pid);
      }
    }
  }
  ASSERT_EQ(children.size(), 2u);
  SessionOptions options = Options(dir.path(), {static_cast<uint32_t>(program.pid())});
  options.sources.follow_children = follow;
  auto session = Session::Start(options, QuietLog());
  ASSERT_TRUE(session.ok()) << session.status();
  const SessionStats started = (*session)->stats();
  usleep(300'000);
  ASSERT_TRUE((*session)->Stop().ok());
  for (uint32_t child : children) kill(static_cast<pid_t>(child), SIGKILL);

  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.problems.empty()) << testing::WhyIncomplete(trace);
  for (uint32_t child : children) {
    const bool listed = std::find(started.targets.begin(), started.targets.end(), child) !=
                        started.targets.end();
    EXPECT_EQ(listed, follow) << "child " << child;
    EXPECT_EQ(trace.processes.contains(child), follow) << "child " << child;
    // Each waits for its sleeps: off the CPU, on its own thread.
    EXPECT_EQ(trace.off_cpu.contains(child), follow) << "child " << child;
  }
  // Left out, they are named where the verdict is read: a master that
  // hands its work to children otherwise reads as idle with no hint why.
  const auto untraced_note = std::ranges::find_if(started.warnings, [](const std::string& warning) {
    return warning.find("child process(es) not traced") != std::string::npos;
  });
  ASSERT_EQ(untraced_note != started.warnings.end(), !follow);
  if (!follow) {
    for (uint32_t child : children) {
      EXPECT_NE(untraced_note->find(std::to_string(child) + " sh"), std::string::npos) << *untraced_note;
    }
    EXPECT_TRUE(trace.notes.contains(*untraced_note)) << "the trace does not say so (verify, report)";
  }
}

INSTANTIATE_TEST_SUITE_P(OnAndOff, FollowChildrenTest, ::testing::Bool());

TEST(SessionTest, ConcurrentSessionsSeeOnlyTheirOwnTargets) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir_one, dir_two;
  ChildProcess one({TestProgram("cpu_ratio"), "1.5"});
  ChildProcess two({TestProgram("cpu_ratio"), "1.5"});
  const uint32_t tid_one = std::stoul(one.ReadWords().at(1));
  const uint32_t tid_two = std::stoul(two.ReadWords().at(1));
  SessionOptions options_one = Options(dir_one.path(), {static_cast<uint32_t>(one.pid())});
  SessionOptions options_two = Options(dir_two.path(), {static_cast<uint32_t>(two.pid())});
  options_one.sources.sample_hz = options_two.sources.sample_hz = 999;
  auto session_one = Session::Start(options_one, QuietLog());
  auto session_two = Session::Start(options_two, QuietLog());
  ASSERT_TRUE(session_one.ok() && session_two.ok());
  one.WriteLine("go");
  two.WriteLine("go");
  ASSERT_EQ(one.ReadWords().at(0), "done");
  ASSERT_EQ(two.ReadWords().at(0), "done");
  ASSERT_TRUE((*session_one)->Stop().ok());
  ASSERT_TRUE((*session_two)->Stop().ok());

  const TraceDigest trace_one = DigestTrace(dir_one.path());
  const TraceDigest trace_two = DigestTrace(dir_two.path());
  EXPECT_EQ(trace_one.sample_tids, std::set<uint32_t>{tid_one});
  EXPECT_EQ(trace_two.sample_tids, std::set<uint32_t>{tid_two});
  EXPECT_EQ(trace_one.processes, std::set<uint32_t>{static_cast<uint32_t>(one.pid())});
  EXPECT_FALSE(trace_one.off_cpu.contains(tid_two));
  EXPECT_FALSE(trace_two.off_cpu.contains(tid_one));
}

TEST(SessionTest, TargetExitingEndsTheSessionHonestly) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  ChildProcess program({TestProgram("cpu_ratio"), "0.3"});
  ASSERT_EQ(program.ReadWords().size(), 2u);
  auto session =
      Session::Start(Options(dir.path(), {static_cast<uint32_t>(program.pid())}), QuietLog());
  ASSERT_TRUE(session.ok());
  const uint32_t pid = static_cast<uint32_t>(program.pid());  // Wait() forgets it
  program.WriteLine("go");
  ASSERT_EQ(program.ReadWords().at(0), "done");
  program.CloseStdin();
  EXPECT_EQ(program.Wait(), 0);
  EXPECT_TRUE((*session)->WaitFinished(10'000'000'000)) << "session outlived its only target";
  ASSERT_TRUE((*session)->Stop().ok());
  const TraceDigest trace = DigestTrace(dir.path());
  EXPECT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  EXPECT_EQ(trace.exited_processes, std::set<uint32_t>{pid});
  for (const auto& [what, count] : trace.losses) {
    EXPECT_TRUE(format::IsCutKey(what)) << "lost " << count << " " << what;  // cuts may be
  }
}

TEST(SessionTest, AttachDetachAndAttachAgain) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  // Busy for longer than both sessions can take on a loaded machine: an idle
  // target gives the second session nothing to write. Killed at scope end.
  ChildProcess program({TestProgram("cpu_ratio"), "60"});
  const uint32_t tid = std::stoul(program.ReadWords().at(1));
  program.WriteLine("go");
  for (const char* id : {"first", "second"}) {
    SessionOptions options = Options(dir.path(), {static_cast<uint32_t>(program.pid())});
    options.writer.session_id = id;
    options.sources.sample_hz = 999;
    auto session = Session::Start(options, QuietLog());
    ASSERT_TRUE(session.ok()) << session.status();
    usleep(200'000);
    ASSERT_TRUE((*session)->Stop().ok());
  }
  const TraceDigest trace = DigestTrace(dir.path());
  EXPECT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  EXPECT_GT(trace.user_samples.at(tid).size(), 100u);
  EXPECT_EQ(trace.kinds.at("process_info"), 2u);  // one per session's segment
}

// A ring of one page overflows; every lost event is counted in the trace.
TEST(SessionTest, OverflowedRingLossesEqualProducedMinusWritten) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  constexpr long kRenames = 200'000;
  ChildProcess program({TestProgram("renamer"), std::to_string(kRenames)});
  ASSERT_EQ(program.ReadWords().size(), 2u);
  SessionOptions options = Options(dir.path(), {static_cast<uint32_t>(program.pid())});
  options.sources.sched = false;  // only the renames (lifecycle) and rare samples
  options.sources.sample_hz = 1;
  options.sources.ring_bytes = static_cast<uint32_t>(sysconf(_SC_PAGESIZE));
  auto session = Session::Start(options, QuietLog());
  ASSERT_TRUE(session.ok()) << session.status();
  program.WriteLine("go");
  ASSERT_EQ(program.ReadLine(), "done " + std::to_string(kRenames));
  ASSERT_TRUE((*session)->Stop().ok());

  const TraceDigest trace = DigestTrace(dir.path());
  const std::vector<std::string>& names = trace.thread_names.at(program.pid());
  // The first name is the preamble's ("renamer"); the rest are events.
  const uint64_t written = std::count_if(names.begin(), names.end(), [](const std::string& n) {
    return n.size() > 1 && n[0] == 'n' && std::isdigit(static_cast<unsigned char>(n[1]));
  });
  const uint64_t lost =
      trace.losses.contains("sched/ring_full") ? trace.losses.at("sched/ring_full") : 0;
  EXPECT_GT(lost, 0u) << "the ring never overflowed: the test proves nothing";
  EXPECT_EQ(written + lost, static_cast<uint64_t>(kRenames));
  EXPECT_FALSE(trace.complete);  // the verdict says so
}

// A caller that is not root traces its own process until that process
// execs a setuid program: from then on, nothing of it is recorded (its
// 300 ms sleep as root is not in the trace), and the trace says why.
TEST(SessionTest, ATargetThatExecsASetuidProgramIsDroppedForACallerThatIsNotRoot) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir bin, dir;
  chmod(bin.path().c_str(), 0755);
  const std::string setuid_sleep = bin.path() + "/setuid_sleep";
  std::filesystem::copy_file("/bin/sleep", setuid_sleep);
  ASSERT_EQ(chown(setuid_sleep.c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(setuid_sleep.c_str(), 04755), 0);
  constexpr uid_t kNobody = 65534;
  int go[2], ready[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0) {
      _exit(1);
    }
    prctl(PR_SET_DUMPABLE, 1);  // a credential change made it undumpable
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (write(ready[1], "r", 1) != 1) _exit(2);
    char byte;
    if (read(go[0], &byte, 1) != 1) _exit(2);
    for (int i = 0; i < 20; ++i) usleep(10'000);  // as nobody: traced
    execl(setuid_sleep.c_str(), "setuid_sleep", "0.3", static_cast<char*>(nullptr));
    _exit(3);
  }
  close(go[0]);
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  close(ready[1]);
  SessionOptions options = Options(dir.path(), {static_cast<uint32_t>(child)});
  options.caller_uid = kNobody;
  options.sources.credentials = Credentials{.uid = kNobody, .gid = kNobody};
  auto session = Session::Start(options, QuietLog());
  if (!session.ok()) kill(child, SIGKILL);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_EQ(write(go[1], "x", 1), 1);
  close(go[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  usleep(100'000);
  ASSERT_TRUE((*session)->Stop().ok());
  const std::vector<std::string> warnings = (*session)->stats().warnings;
  EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(), [](const std::string& w) {
    return w.find("runs with rights its user does not have") != std::string::npos;
  })) << ::testing::PrintToString(warnings);

  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.readable);
  EXPECT_EQ(trace.kinds.at("process_exec"), 1u);
  const uint32_t tid = static_cast<uint32_t>(child);
  ASSERT_TRUE(trace.off_cpu.contains(tid)) << "nobody's own sleeps were not traced";
  EXPECT_GE(trace.off_cpu.at(tid).size(), 15u);
  for (const testing::OffCpuInterval& wait : trace.off_cpu.at(tid)) {
    EXPECT_LT(wait.duration_ns, 200'000'000u) << "the setuid program's sleep was recorded";
  }
  EXPECT_FALSE(trace.exited_processes.contains(tid)) << "the setuid program's exit was recorded";
}

TEST(SessionTest, BadTargetsAreClearErrors) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  auto missing = Session::Start(Options(dir.path(), {4'000'000}), QuietLog());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().ToString().find("no process with pid 4000000"), std::string::npos);

  auto kernel = Session::Start(Options(dir.path(), {2}), QuietLog());  // kthreadd
  ASSERT_FALSE(kernel.ok());
  EXPECT_NE(kernel.status().ToString().find("kernel thread"), std::string::npos) << kernel.status();

  SessionOptions someone_else = Options(dir.path(), {1});  // init, owned by root
  someone_else.caller_uid = 65534;
  auto refused = Session::Start(someone_else, QuietLog());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().ToString().find("may trace only its own"), std::string::npos);

  SessionOptions bad_ring = Options(dir.path(), {1});
  bad_ring.sources.ring_bytes = 12345;
  auto invalid = Session::Start(bad_ring, QuietLog());
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().ToString().find("ring_buffer_size = 12345"), std::string::npos);
}

}  // namespace
}  // namespace loupe::session
