// Caller-scoped authority (issue 15), as root acting for nobody: the
// calling thread alone takes the caller's file rights and gives them back;
// a writer for nobody cannot write where nobody cannot, makes files nobody
// owns, and never evicts root's segments from a folder they share; a probe
// path nobody cannot walk fails the same whether or not the file exists.
// Needs root (to take another user's credentials); skips without it,
// fails instead under LOUPE_REQUIRE_PRIVILEGED=1.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "daemon/base/credentials.h"
#include "daemon/format/segment_files.h"
#include "daemon/format/segment_writer.h"
#include "daemon/format/trace_reader.h"
#include "daemon/probes/probe_plan.h"
#include "daemon/session/targets.h"
#include "tests/support/privileged.h"
#include "tests/support/temp_dir.h"

namespace loupe {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMs = 1'000'000;

#define REQUIRE_ROOT()                                                                  \
  do {                                                                                  \
    if (geteuid() != 0) {                                                               \
      if (::loupe::testing::PrivilegesRequired()) {                                     \
        FAIL() << "LOUPE_REQUIRE_PRIVILEGED=1 but not root";                            \
      }                                                                                 \
      GTEST_SKIP() << "needs root: only root may take another user's file credentials"; \
    }                                                                                   \
  } while (0)

Credentials Nobody() {
  const passwd* entry = getpwnam("nobody");
  return entry != nullptr ? Credentials{entry->pw_uid, entry->pw_gid, {}}
                          : Credentials{65534, 65534, {}};
}

// The fsuid of thread `tid`, as the kernel reports it (the 4th Uid: field).
uid_t FsUidOf(pid_t tid) {
  std::ifstream status(fmt::format("/proc/self/task/{}/status", tid));
  std::string key;
  uid_t real, effective, saved, fs;
  while (status >> key) {
    if (key == "Uid:" && status >> real >> effective >> saved >> fs) return fs;
  }
  return static_cast<uid_t>(-1);
}

uint64_t EffectiveCaps() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  syscall(SYS_capget, &header, data);
  return uint64_t{data[1].effective} << 32 | data[0].effective;
}

// A root-only folder (0700) holding a file.
struct RootOnly {
  testing::TempDir dir;
  std::string secret;
  RootOnly() {
    chmod(dir.path().c_str(), 0755);
    fs::create_directory(dir.File("private"));
    chmod(dir.File("private").c_str(), 0700);
    secret = dir.File("private/secret");
    std::ofstream(secret) << "root's";
  }
};

bool CanOpen(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return fd.valid();
}

TEST(ScopedFsCredentialsTest, NobodyCannotOpenRootsFilesAndRootIsBackAfter) {
  REQUIRE_ROOT();
  RootOnly root_only;
  const uint64_t caps = EffectiveCaps();
  ASSERT_TRUE(CanOpen(root_only.secret));
  {
    ScopedFsCredentials as_nobody;
    ASSERT_TRUE(as_nobody.Take(Nobody()).ok());
    EXPECT_EQ(FsUidOf(static_cast<pid_t>(syscall(SYS_gettid))), Nobody().uid);
    EXPECT_FALSE(CanOpen(root_only.secret));
    EXPECT_EQ(errno, EACCES);
    // Not even CAP_DAC_READ_SEARCH lets it list the folder.
    EXPECT_EQ(opendir(root_only.dir.File("private").c_str()), nullptr);
  }
  EXPECT_EQ(FsUidOf(static_cast<pid_t>(syscall(SYS_gettid))), 0u);
  EXPECT_EQ(EffectiveCaps(), caps);
  EXPECT_TRUE(CanOpen(root_only.secret));
}

TEST(ScopedFsCredentialsTest, OnlyTheCallingThreadChanges) {
  REQUIRE_ROOT();
  RootOnly root_only;
  const pid_t main_tid = static_cast<pid_t>(syscall(SYS_gettid));
  std::atomic<int> step = 0;
  pid_t other_tid = 0;
  std::thread other([&] {
    other_tid = static_cast<pid_t>(syscall(SYS_gettid));
    ScopedFsCredentials as_nobody;
    EXPECT_TRUE(as_nobody.Take(Nobody()).ok());
    step = 1;
    while (step != 2) std::this_thread::yield();
  });
  while (step != 1) std::this_thread::yield();
  EXPECT_EQ(FsUidOf(other_tid), Nobody().uid);
  EXPECT_EQ(FsUidOf(main_tid), 0u);
  EXPECT_TRUE(CanOpen(root_only.secret));  // this thread is still root
  step = 2;
  other.join();
}

TEST(ScopedFsCredentialsTest, RootAndNoCredentialsChangeNothing) {
  ScopedFsCredentials none, root;
  EXPECT_TRUE(none.Take(std::nullopt).ok());
  EXPECT_TRUE(root.Take(Credentials{}).ok());
  EXPECT_FALSE(none.taken());
  EXPECT_FALSE(root.taken());
}

format::WriterOptions WriterFor(const std::string& dir, const std::string& session,
                                std::optional<Credentials> caller,
                                std::shared_ptr<format::DirectoryBudgets> budgets) {
  format::WriterOptions options{.directory = dir, .session_id = session};
  options.max_file_size = 64 << 10;
  options.max_total_size = 160 << 10;  // two open files, then 32 KiB of sealed ones
  options.block_bytes = 4 << 10;
  options.rotation_period_ns = 5 * kMs;
  options.writer_id = "louped /run/test.sock";
  options.credentials = std::move(caller);
  options.budgets = std::move(budgets);
  return options;
}

format::Record Event(uint64_t i) {
  return {.time_ns = 1'000 * kMs + i * 100'000,
          .tid = static_cast<uint32_t>(i * 2654435761u),
          .payload = format::SchedSwitch{static_cast<uint32_t>(i * 40503u), 1}};
}

TEST(CallerWriterTest, NobodyCannotWriteWhereNobodyCannot) {
  REQUIRE_ROOT();
  RootOnly root_only;
  for (const std::string& dir :
       {root_only.dir.File("private"), root_only.dir.File("private/new/deeper")}) {
    auto writer = format::SegmentWriter::Create(WriterFor(dir, "s", Nobody(), nullptr), {});
    ASSERT_FALSE(writer.ok()) << dir;
    EXPECT_EQ(writer.status().code(), absl::StatusCode::kPermissionDenied) << writer.status();
  }
  EXPECT_FALSE(fs::exists(root_only.dir.File("private/new")));
  // Root's own session may (and the check did not leave root as nobody).
  EXPECT_TRUE(
      format::SegmentWriter::Create(WriterFor(root_only.dir.File("private"), "r", {}, nullptr), {})
          .ok());
}

TEST(CallerWriterTest, NobodysFilesAreNobodysAndRootsSegmentsSurviveItsSession) {
  REQUIRE_ROOT();
  testing::TempDir shared;
  // Neither a sticky bit nor file modes protect root's segments here (a
  // folder anyone may write, files anyone may read): louped's own rule does.
  chmod(shared.path().c_str(), 0777);
  auto budgets = std::make_shared<format::DirectoryBudgets>();
  // Root's session keeps writing meanwhile: its segments are in the budget
  // nobody's session enforces, and still not nobody's to evict.
  format::WriterOptions of_root = WriterFor(shared.path(), "root", {}, budgets);
  of_root.file_mode = 0644;
  auto root = format::SegmentWriter::Create(of_root, {});
  ASSERT_TRUE(root.ok()) << root.status();
  uint64_t i = 0;
  for (int n = 0; n < 2000; ++n) ASSERT_TRUE((*root)->Append(Event(i++)).ok());
  ASSERT_TRUE((*root)->Tick(Event(i).time_ns + 10 * kMs).ok());
  const std::vector<std::string> roots = (*root)->sealed_paths();
  ASSERT_GT(roots.size(), 3u);

  auto nobody =
      format::SegmentWriter::Create(WriterFor(shared.path(), "nobody", Nobody(), budgets), {});
  ASSERT_TRUE(nobody.ok()) << nobody.status();
  for (int n = 0; n < 20'000; ++n) ASSERT_TRUE((*nobody)->Append(Event(i++)).ok());
  ASSERT_TRUE((*nobody)->Close().ok());
  EXPECT_GT((*nobody)->stats().segments_evicted, 0u);  // its own, to stay near the budget
  for (const std::string& path : roots) EXPECT_TRUE(fs::exists(path)) << path;
  EXPECT_EQ((*root)->stats().segments_evicted, 0u);
  ASSERT_TRUE((*root)->Close().ok());

  const mode_t mask = umask(0);
  umask(mask);
  int nobodys = 0;
  for (const auto& entry : fs::directory_iterator(shared.path())) {
    if (!entry.path().filename().string().starts_with("nobody-")) continue;
    struct stat st;
    ASSERT_EQ(stat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, Nobody().uid) << entry.path();
    EXPECT_EQ(st.st_gid, Nobody().gid) << entry.path();
    EXPECT_EQ(st.st_mode & 0777, 0640u & ~mask) << entry.path();
    ++nobodys;
  }
  EXPECT_GT(nobodys, 0);
}

// A user with no entry in the user database: no groups but its own.
Credentials Stranger() {
  uid_t uid = 12345;
  while (getpwuid(uid) != nullptr) ++uid;
  return Credentials{uid, uid, {}};
}

std::vector<std::string> SegmentsIn(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix) && name.ends_with(format::kSealedSuffix)) {
      paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

void WriteSession(const format::WriterOptions& options, uint64_t* i, int events) {
  auto writer = format::SegmentWriter::Create(options, {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (int n = 0; n < events; ++n) ASSERT_TRUE((*writer)->Append(Event((*i)++)).ok());
  ASSERT_TRUE((*writer)->Close().ok());
}

// A member copies a segment of its own under a name of its own, makes it
// 1 TiB (sparse) and dates it 2099. Root's next session in the folder
// counts it by the blocks it takes, so evicts nobody's and no one else's
// segments for it.
TEST(CallerWriterTest, AMembersSparseFutureDecoyMakesRootEvictNothing) {
  REQUIRE_ROOT();
  testing::TempDir shared;
  chmod(shared.path().c_str(), 01777);  // as louped's folder: all write, the sticky bit keeps apart
  constexpr uint64_t kRoomy = 8 << 20;
  uint64_t i = 0;
  for (const auto& [who, session] : {std::pair{Stranger(), "other"}, {Nobody(), "nobody"}}) {
    format::WriterOptions options = WriterFor(shared.path(), session, who, nullptr);
    options.max_total_size = kRoomy;
    WriteSession(options, &i, 2000);
  }
  const std::vector<std::string> others = SegmentsIn(shared.path(), "other-");
  const std::vector<std::string> nobodys = SegmentsIn(shared.path(), "nobody-");
  ASSERT_GT(others.size(), 3u);
  const std::string decoy = shared.File("x-000001.loupe");
  fs::copy_file(nobodys.front(), decoy);
  ASSERT_EQ(chown(decoy.c_str(), Nobody().uid, Nobody().gid), 0);
  fs::resize_file(decoy, uint64_t{1} << 40);
  fs::last_write_time(decoy, fs::file_time_type::clock::now() + std::chrono::hours(24 * 365 * 70));

  format::WriterOptions of_root =
      WriterFor(shared.path(), "root", {}, std::make_shared<format::DirectoryBudgets>());
  of_root.max_total_size = kRoomy;
  auto root = format::SegmentWriter::Create(of_root, {});
  ASSERT_TRUE(root.ok()) << root.status();
  for (int n = 0; n < 2000; ++n) ASSERT_TRUE((*root)->Append(Event(i++)).ok());
  ASSERT_TRUE((*root)->Close().ok());
  EXPECT_EQ((*root)->stats().segments_evicted, 0u);
  for (const std::string& path : others) EXPECT_TRUE(fs::exists(path)) << path;
  for (const std::string& path : nobodys) EXPECT_TRUE(fs::exists(path)) << path;
}

// nobody's file claims to be root's live session (its header's session
// id) and carries a tally of its own: evicting it is no loss of root's, so
// root's trace accounts for exactly root's events, and never names it.
TEST(CallerWriterTest, AForgedTallyNeverReachesRootsTrace) {
  REQUIRE_ROOT();
  testing::TempDir shared;
  chmod(shared.path().c_str(), 01777);
  uint64_t i = 0;
  format::WriterOptions forged = WriterFor(shared.path(), "r", Nobody(), nullptr);
  forged.max_total_size = 8 << 20;
  WriteSession(forged, &i, 3000);
  std::set<std::string> decoys;
  for (const std::string& path : SegmentsIn(shared.path(), "r-")) {
    const std::string renamed = shared.File("q" + fs::path(path).filename().string().substr(1));
    fs::rename(path, renamed);
    decoys.insert(fs::path(renamed).filename().string());
  }
  ASSERT_GT(decoys.size(), 2u);

  auto root = format::SegmentWriter::Create(
      WriterFor(shared.path(), "r", {}, std::make_shared<format::DirectoryBudgets>()), {});
  ASSERT_TRUE(root.ok()) << root.status();
  constexpr uint64_t kWritten = 20'000;
  for (uint64_t n = 0; n < kWritten; ++n) ASSERT_TRUE((*root)->Append(Event(i++)).ok());
  ASSERT_TRUE((*root)->Close().ok());
  ASSERT_GT((*root)->stats().segments_evicted, 0u);
  // The decoys were the oldest: evicted, as nobody (who owns them).
  for (const std::string& name : decoys) EXPECT_FALSE(fs::exists(shared.File(name))) << name;

  auto trace = format::TraceReader::Open(SegmentsIn(shared.path(), "r-"));
  ASSERT_TRUE(trace.ok()) << trace.status();
  uint64_t events = 0, reported = 0;
  format::Record record;
  while ((*trace)->Next(&record)) {
    const format::Loss* loss = std::get_if<format::Loss>(&record.payload);
    if (loss != nullptr && loss->reason == format::LossReason::kSegmentEvicted) {
      reported += loss->count;
    } else if (std::holds_alternative<format::SchedSwitch>(record.payload)) {
      ++events;
    }
  }
  EXPECT_EQ(events + reported, kWritten);
  EXPECT_EQ((*root)->stats().events_lost, reported);
  for (const format::SegmentSummary& summary : (*trace)->summaries()) {
    for (const std::string& name : summary.trailer.evicted_segments()) {
      EXPECT_FALSE(decoys.contains(name)) << summary.path << " reports " << name;
    }
  }
}

// Root's session evicts a file only as its owner would: a segment of
// another user in a folder that user cannot write stays (the folder is
// over budget by it), while root's own go oldest first.
TEST(CallerWriterTest, RootNeverEvictsWhatTheOwnerCouldNot) {
  REQUIRE_ROOT();
  testing::TempDir dir;
  chmod(dir.path().c_str(), 0755);
  uint64_t i = 0;
  format::WriterOptions old = WriterFor(dir.path(), "old", {}, nullptr);
  old.max_total_size = 8 << 20;
  WriteSession(old, &i, 2000);
  const std::vector<std::string> olds = SegmentsIn(dir.path(), "old-");
  ASSERT_GT(olds.size(), 3u);
  const Credentials stranger = Stranger();
  ASSERT_EQ(chown(olds.front().c_str(), stranger.uid, stranger.gid), 0);

  auto root = format::SegmentWriter::Create(
      WriterFor(dir.path(), "new", {}, std::make_shared<format::DirectoryBudgets>()), {});
  ASSERT_TRUE(root.ok()) << root.status();
  for (int n = 0; n < 20'000; ++n) ASSERT_TRUE((*root)->Append(Event(i++)).ok());
  ASSERT_TRUE((*root)->Close().ok());
  EXPECT_TRUE(fs::exists(olds.front()));
  for (size_t n = 1; n < olds.size(); ++n) EXPECT_FALSE(fs::exists(olds[n])) << olds[n];
}

TEST(CallerProbesTest, APathNobodyCannotWalkFailsTheSameWhetherOrNotItExists) {
  REQUIRE_ROOT();
  RootOnly root_only;
  // An ELF file with a known symbol, inside the root-only folder.
  fs::copy_file("/proc/self/exe", root_only.dir.File("private/app"));
  auto plan_for = [&](const std::string& file, std::optional<Credentials> caller) {
    probes::ProbeRequests requests;
    EXPECT_TRUE(probes::ParseProbeRequests({}, {file + ":main"}, &requests).ok());
    requests.credentials = std::move(caller);
    return probes::PlanProbes({static_cast<uint32_t>(getpid())}, requests, /*shim=*/false,
                              /*system_wide=*/false);
  };
  auto warnings = [](const probes::ProbePlan& plan, const std::string& file) {
    std::string text;
    for (std::string warning : plan.warnings) {
      if (const size_t at = warning.find(file); at != std::string::npos) {
        warning.replace(at, file.size(), "FILE");
      }
      text += warning + "\n";
    }
    return text;
  };
  const std::string exists = root_only.dir.File("private/app");
  const std::string missing = root_only.dir.File("private/none");

  const probes::ProbePlan root_exists = plan_for(exists, std::nullopt);
  EXPECT_EQ(root_exists.attachments.size(), 1u) << warnings(root_exists, exists);
  EXPECT_NE(warnings(plan_for(missing, std::nullopt), missing), warnings(root_exists, exists));

  const probes::ProbePlan nobody_exists = plan_for(exists, Nobody());
  const probes::ProbePlan nobody_missing = plan_for(missing, Nobody());
  EXPECT_TRUE(nobody_exists.attachments.empty());
  EXPECT_EQ(warnings(nobody_exists, exists), warnings(nobody_missing, missing));
  EXPECT_NE(warnings(nobody_exists, exists).find("Permission denied"), std::string::npos)
      << warnings(nobody_exists, exists);
  EXPECT_TRUE(nobody_exists.per_pid);
}

TEST(CallerProbesTest, NobodysProbesAttachPerProcessAndSayChildrenGetNone) {
  REQUIRE_ROOT();
  testing::TempDir dir;
  chmod(dir.path().c_str(), 0755);
  const std::string app = dir.File("app");
  fs::copy_file("/proc/self/exe", app);
  chmod(app.c_str(), 0755);
  probes::ProbeRequests requests;
  ASSERT_TRUE(probes::ParseProbeRequests({}, {app + ":main"}, &requests).ok());

  const probes::ProbePlan as_root =
      probes::PlanProbes({static_cast<uint32_t>(getpid())}, requests, false, /*system_wide=*/true);
  EXPECT_FALSE(as_root.per_pid);
  requests.credentials = Nobody();
  const probes::ProbePlan as_nobody =
      probes::PlanProbes({static_cast<uint32_t>(getpid())}, requests, false, /*system_wide=*/true);
  ASSERT_EQ(as_nobody.attachments.size(), 1u) << ::testing::PrintToString(as_nobody.warnings);
  EXPECT_TRUE(as_nobody.per_pid);
  EXPECT_EQ(as_nobody.attachments[0].pid, static_cast<uint32_t>(getpid()));
  bool warned = false;
  for (const std::string& warning : as_nobody.warnings) {
    warned = warned || warning.find("children started later get no uprobes") != std::string::npos;
  }
  EXPECT_TRUE(warned) << ::testing::PrintToString(as_nobody.warnings);
}

}  // namespace
}  // namespace loupe

namespace loupe {
namespace {

// A process of nobody's that holds more than nobody's rights in ptrace's eyes
// (here: undumpable, as a setuid program is) is not nobody's to trace; a
// plain one is.
TEST(CallerTargetsTest, NobodyMayNotTraceItsUndumpableOrSetuidProcesses) {
  REQUIRE_ROOT();
  const Credentials nobody = Nobody();
  auto spawn = [&](bool dumpable) {
    int ready[2];
    EXPECT_EQ(pipe(ready), 0);
    const pid_t child = fork();
    if (child == 0) {
      if (setresgid(nobody.gid, nobody.gid, nobody.gid) != 0 ||
          setresuid(nobody.uid, nobody.uid, nobody.uid) != 0) {
        _exit(1);
      }
      prctl(PR_SET_DUMPABLE, dumpable ? 1 : 0);
      (void)!write(ready[1], "x", 1);
      // Gone with the test, whatever happens to it.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      pause();
      _exit(0);
    }
    char byte;
    EXPECT_EQ(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    close(ready[1]);
    return child;
  };
  const pid_t plain = spawn(true);
  const pid_t undumpable = spawn(false);
  absl::StatusOr<session::Targets> allowed =
      session::Targets::Resolve({static_cast<uint32_t>(plain)}, 0, nobody.uid, false);
  EXPECT_TRUE(allowed.ok()) << allowed.status();
  absl::StatusOr<session::Targets> refused =
      session::Targets::Resolve({static_cast<uint32_t>(undumpable)}, 0, nobody.uid, false);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("not dumpable"), std::string::npos)
      << refused.status();
  // Root may trace both.
  EXPECT_TRUE(
      session::Targets::Resolve({static_cast<uint32_t>(undumpable)}, 0, 0, false).ok());
  for (pid_t child : {plain, undumpable}) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
}

// The note naming a target's children left untraced names only those the
// caller could trace: louped reads /proc with more rights than the caller.
TEST(CallerTargetsTest, AnUntracedChildIsNamedOnlyToACallerWhoMayTraceIt) {
  REQUIRE_ROOT();
  const Credentials nobody = Nobody();
  int pids[2];
  ASSERT_EQ(pipe(pids), 0);
  const pid_t parent = fork();
  if (parent == 0) {
    if (setresgid(nobody.gid, nobody.gid, nobody.gid) != 0 ||
        setresuid(nobody.uid, nobody.uid, nobody.uid) != 0) {
      _exit(1);
    }
    prctl(PR_SET_DUMPABLE, 1);  // changing credentials cleared it
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pid_t children[2];
    for (int dumpable = 1; dumpable >= 0; --dumpable) {
      children[dumpable] = fork();
      if (children[dumpable] == 0) {
        prctl(PR_SET_DUMPABLE, dumpable);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pause();
        _exit(0);
      }
    }
    (void)!write(pids[1], children, sizeof children);
    pause();
    _exit(0);
  }
  pid_t children[2];  // [0] undumpable, [1] plain
  ASSERT_EQ(read(pids[0], children, sizeof children), static_cast<ssize_t>(sizeof children));
  close(pids[0]);
  close(pids[1]);
  usleep(50'000);  // each child has made itself undumpable or not
  auto note = [&](uint32_t caller_uid) {
    absl::StatusOr<session::Targets> targets =
        session::Targets::Resolve({static_cast<uint32_t>(parent)}, 0, caller_uid, false);
    EXPECT_TRUE(targets.ok()) << targets.status();
    return targets.ok() && targets->notes().size() == 1 ? targets->notes()[0] : std::string();
  };
  const std::string plain = std::to_string(children[1]) + " ", undumpable = std::to_string(children[0]) + " ";
  const std::string as_nobody = note(nobody.uid), as_root = note(0);
  EXPECT_NE(as_nobody.find("1 child process(es)"), std::string::npos) << as_nobody;
  EXPECT_NE(as_nobody.find(plain), std::string::npos) << as_nobody;
  EXPECT_EQ(as_nobody.find(undumpable), std::string::npos) << as_nobody;
  EXPECT_NE(as_root.find("2 child process(es)"), std::string::npos) << as_root;
  EXPECT_NE(as_root.find(undumpable), std::string::npos) << as_root;
  kill(parent, SIGKILL);
  waitpid(parent, nullptr, 0);
}

}  // namespace
}  // namespace loupe
