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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "daemon/base/credentials.h"
#include "daemon/format/segment_files.h"
#include "daemon/format/segment_writer.h"
#include "daemon/probes/probe_plan.h"
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
