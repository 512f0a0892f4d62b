// The kernel side of run-queue evidence, on real processes pinned to one
// CPU: who held the CPU while a traced thread waited for it (threads of an
// untraced process, named), who woke a thread and from which context, and
// migrations of traced threads between run queues.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/sinks/null_sink.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "daemon/format/trace_reader.h"
#include "daemon/session/session.h"
#include "tests/support/privileged.h"
#include "tests/support/temp_dir.h"

namespace loupe::session {
namespace {

pid_t Gettid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

void PinTo(pid_t tid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(tid, sizeof set, &set);
}

void Spin(uint64_t ns) {
  timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (static_cast<uint64_t>(now.tv_sec - start.tv_sec) * 1'000'000'000 + now.tv_nsec -
               start.tv_nsec <
           ns);
}

// A process forked from the test (before any session thread exists) that
// runs `body`, reports the tids it wants known through one pipe and may
// wait for Go() on another. Killed and reaped when the test ends.
class Forked {
 public:
  explicit Forked(const std::function<void(int report_fd, int go_fd)>& body) {
    int report[2], go[2];
    if (pipe(report) != 0 || pipe(go) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(report[0]);
      close(go[1]);
      body(report[1], go[0]);
      _exit(0);
    }
    close(report[1]);
    close(go[0]);
    report_ = report[0];
    go_ = go[1];
  }
  ~Forked() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (report_ >= 0) close(report_);
    if (go_ >= 0) close(go_);
  }
  void Go() {
    if (write(go_, "g", 1) != 1) ADD_FAILURE() << "the child is gone";
  }
  pid_t pid() const { return pid_; }
  pid_t ReadTid() {
    pid_t tid = 0;
    return read(report_, &tid, sizeof tid) == sizeof tid ? tid : 0;
  }
  void Wait() {
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int report_ = -1;
  int go_ = -1;
};

void AwaitGo(int go_fd) {
  char c;
  if (read(go_fd, &c, 1) != 1) _exit(1);
}

void Report(int fd, pid_t tid) {
  if (write(fd, &tid, sizeof tid) != sizeof tid) _exit(1);
}

// An untraced process "compressor" whose thread "bg_compress" spins on CPU 0.
void Compressor(int report_fd, int) {
  prctl(PR_SET_NAME, "compressor");
  pthread_t thread;
  pthread_create(
      &thread, nullptr,
      [](void* fd) -> void* {
        prctl(PR_SET_NAME, "bg_compress");
        PinTo(0, 0);
        Report(*static_cast<int*>(fd), Gettid());
        while (true) Spin(1'000'000'000);
      },
      &report_fd);
  pthread_join(thread, nullptr);
}

// A traced process on CPU 0: its main thread works a little, wakes a
// reader thread through a pipe, and sleeps in nanosleep, `rounds` times.
// Reports the reader's tid, then its own.
void PingSleeper(int report_fd, int go_fd, int rounds) {
  PinTo(0, 0);
  static int wake[2];
  static std::atomic<pid_t> reader_tid = 0;
  if (pipe(wake) != 0) _exit(1);
  pthread_t reader;
  pthread_create(
      &reader, nullptr,
      [](void*) -> void* {
        reader_tid = Gettid();
        char c;
        while (read(wake[0], &c, 1) == 1) Spin(50'000);
        return nullptr;
      },
      nullptr);
  while (reader_tid == 0) usleep(1000);
  Report(report_fd, reader_tid);
  Report(report_fd, Gettid());
  AwaitGo(go_fd);
  for (int i = 0; i < rounds; ++i) {
    Spin(200'000);
    if (write(wake[1], "x", 1) != 1) _exit(1);
    const timespec nap{0, 2'000'000};
    nanosleep(&nap, nullptr);
  }
  close(wake[1]);
  pthread_join(reader, nullptr);
}

std::shared_ptr<spdlog::logger> QuietLog() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

std::unique_ptr<Session> StartSession(const std::string& dir, pid_t target) {
  SessionOptions options;
  options.pids = {static_cast<uint32_t>(target)};
  options.writer.directory = dir;
  options.writer.session_id = "test";
  options.sources.cpu = false;
  auto session = Session::Start(options, QuietLog());
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? *std::move(session) : nullptr;
}

// Traces `target` from Go() until it exits; false if the session failed.
bool TraceUntilItEnds(const std::string& dir, Forked& target) {
  std::unique_ptr<Session> session = StartSession(dir, target.pid());
  if (session == nullptr) return false;
  target.Go();
  target.Wait();
  const absl::Status stopped = session->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
  return stopped.ok();
}

// Every record of the trace, in time order, with its strings copied.
struct Event {
  format::Record record;
  std::string name, process_name;
};
std::vector<Event> ReadTrace(const std::string& dir) {
  std::vector<Event> events;
  auto reader = format::TraceReader::Open({dir});
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return events;
  format::Record record;
  while ((*reader)->Next(&record)) {
    Event event{record, {}, {}};
    if (const auto* info = std::get_if<format::ThreadInfo>(&record.payload)) {
      event.name = info->name;
      event.process_name = info->process_name;
    }
    events.push_back(std::move(event));
  }
  return events;
}

TEST(CpuHoldersTest, UntracedThreadsThatHeldTheCpuAreNamedAndTheirTimeAddsUp) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  Forked compressor(Compressor);
  const pid_t bg_tid = compressor.ReadTid();
  Forked target([](int fd, int go) { PingSleeper(fd, go, 300); });
  const pid_t reader_tid = target.ReadTid();
  const pid_t main_tid = target.ReadTid();
  ASSERT_GT(bg_tid, 0);
  ASSERT_GT(main_tid, 0);
  ASSERT_TRUE(TraceUntilItEnds(dir.path(), target));

  const std::set<uint32_t> targets = {static_cast<uint32_t>(reader_tid),
                                      static_cast<uint32_t>(main_tid)};
  std::set<uint32_t> waiting;
  uint32_t holder0 = 0;  // on CPU 0, as its switches tell
  uint64_t last_ns = 0, held_ns = 0, bg_switches_while_waiting = 0;
  bool described = false, described_before_switch = true;
  for (const Event& event : ReadTrace(dir.path())) {
    const format::Record& record = event.record;
    if (holder0 == static_cast<uint32_t>(bg_tid) && !waiting.empty() && last_ns != 0) {
      held_ns += record.time_ns - last_ns;
    }
    last_ns = record.time_ns;
    if (const auto* info = std::get_if<format::ThreadInfo>(&record.payload)) {
      if (info->foreign && record.tid == static_cast<uint32_t>(bg_tid)) {
        described = true;
        EXPECT_EQ(info->pid, static_cast<uint32_t>(compressor.pid()));
        EXPECT_EQ(event.name, "bg_compress");
        EXPECT_EQ(event.process_name, "compressor");
      }
    } else if (const auto* wakeup = std::get_if<format::SchedWakeup>(&record.payload)) {
      if (targets.contains(wakeup->woken_tid)) waiting.insert(wakeup->woken_tid);
    } else if (const auto* change = std::get_if<format::SchedSwitch>(&record.payload)) {
      const bool bg_side = record.tid == static_cast<uint32_t>(bg_tid) ||
                           change->next_tid == static_cast<uint32_t>(bg_tid);
      if (bg_side && !described) described_before_switch = false;
      if (record.tid == static_cast<uint32_t>(bg_tid) && !waiting.empty()) {
        ++bg_switches_while_waiting;
      }
      if (targets.contains(record.tid) && format::TaskState(change->prev_state) == 0) {
        waiting.insert(record.tid);
      }
      waiting.erase(change->next_tid);
      if (record.cpu == 0) holder0 = change->next_tid;
    }
  }
  EXPECT_TRUE(described) << "no foreign thread_info for bg_compress";
  EXPECT_TRUE(described_before_switch) << "a switch of bg_compress before its thread_info";
  EXPECT_GT(bg_switches_while_waiting, 0u);
  EXPECT_GT(held_ns, 0u) << "bg_compress never held CPU 0 while a target waited";
}

TEST(CpuHoldersTest, WakersAreNamedWithTheirContext) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  Forked target([](int fd, int go) { PingSleeper(fd, go, 200); });
  const pid_t reader_tid = target.ReadTid();
  const pid_t main_tid = target.ReadTid();
  ASSERT_GT(main_tid, 0);
  ASSERT_TRUE(TraceUntilItEnds(dir.path(), target));

  std::map<format::WakerContext, uint64_t> sleeper_contexts;
  uint64_t reader_wakeups = 0, reader_by_writer = 0;
  for (const Event& event : ReadTrace(dir.path())) {
    const auto* wakeup = std::get_if<format::SchedWakeup>(&event.record.payload);
    if (wakeup == nullptr) continue;
    if (wakeup->woken_tid == static_cast<uint32_t>(main_tid)) {
      // Besides its timer, Go() wakes it, and the reader's exit in pthread_join.
      const bool go = event.record.tid == static_cast<uint32_t>(Gettid());
      const bool join = event.record.tid == static_cast<uint32_t>(reader_tid);
      if (!go && !join) ++sleeper_contexts[wakeup->context];
    } else if (wakeup->woken_tid == static_cast<uint32_t>(reader_tid)) {
      ++reader_wakeups;
      reader_by_writer += wakeup->context == format::WakerContext::kTask &&
                          event.record.tid == static_cast<uint32_t>(main_tid);
    }
  }
  // nanosleep ends in an hrtimer callback: a timer's, or a hard interrupt's.
  const uint64_t from_timer = sleeper_contexts[format::WakerContext::kTimer] +
                              sleeper_contexts[format::WakerContext::kHardIrq];
  EXPECT_GE(from_timer, 150u);
  EXPECT_EQ(sleeper_contexts[format::WakerContext::kTask], 0u);
  EXPECT_GE(reader_wakeups, 100u);
  EXPECT_EQ(reader_by_writer, reader_wakeups) << "a pipe wakeup not from the writing thread";
}

// An untraced process "busy" with a thread spinning in user space on each
// CPU, so that an interrupt lands on a running task. Reports their tids.
void BusyEverywhere(int report_fd, int) {
  prctl(PR_SET_NAME, "busy");
  static int fd;
  fd = report_fd;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (long cpu = 0; cpu < cpus; ++cpu) {
    pthread_t thread;
    pthread_create(
        &thread, nullptr,
        [](void* cpu) -> void* {
          PinTo(0, static_cast<int>(reinterpret_cast<intptr_t>(cpu)));
          Report(fd, Gettid());
          while (true) Spin(1'000'000'000);
        },
        reinterpret_cast<void*>(cpu));
  }
  pause();
}

// A traced process that reads the `reads` blocks of `path` with O_DIRECT,
// over and over, each read that sleeps woken by the disk's completion
// interrupt. Reports its tid.
void DiskReader(int report_fd, int go_fd, const std::string& path, int reads) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECT);
  void* buffer = nullptr;
  if (fd < 0 || posix_memalign(&buffer, 4096, 4096) != 0) _exit(1);
  Report(report_fd, Gettid());
  AwaitGo(go_fd);
  // Until `reads` of them slept (a read whose completion comes before the
  // reader leaves its CPU does not; on this machine's virtual disk, from
  // none to all of a run), within a bound. Reports how many slept.
  struct rusage before, now;
  getrusage(RUSAGE_THREAD, &before);
  long slept = 0;
  for (int i = 0; slept < reads && i < 100 * reads; ++i) {
    if (pread(fd, buffer, 4096, static_cast<off_t>(i % reads) * 4096) != 4096) _exit(1);
    getrusage(RUSAGE_THREAD, &now);
    slept = now.ru_nvcsw - before.ru_nvcsw;
  }
  Report(report_fd, static_cast<pid_t>(slept));
}

TEST(CpuHoldersTest, ADisksCompletionIsAnInterruptsWakeupNotTheInterruptedTasks) {
  LOUPE_REQUIRE_PRIVILEGES();
  // On /var/tmp: /tmp may be a tmpfs, where no read waits for a disk.
  char path[] = "/var/tmp/loupe-disk-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0) << "mkstemp in /var/tmp: " << std::strerror(errno);
  struct statfs fs;
  const bool tmpfs = fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  constexpr int kReads = 200;
  const std::string block(4096, 'x');
  for (int i = 0; i < kReads; ++i) ASSERT_EQ(write(fd, block.data(), block.size()), 4096);
  ASSERT_EQ(fsync(fd), 0);
  close(fd);
  struct Unlink {
    const char* path;
    ~Unlink() { unlink(path); }
  } unlink_file{path};
  if (tmpfs) GTEST_SKIP() << "/var/tmp is a tmpfs: no read there waits for a disk";

  testing::TempDir dir;
  Forked busy(BusyEverywhere);
  std::set<uint32_t> busy_tids;
  for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN); ++cpu) busy_tids.insert(busy.ReadTid());
  const std::string file = path;
  Forked reader([&](int report, int go) { DiskReader(report, go, file, kReads); });
  const pid_t reader_tid = reader.ReadTid();
  ASSERT_GT(reader_tid, 0);
  ASSERT_TRUE(TraceUntilItEnds(dir.path(), reader));

  uint64_t wakeups = 0, from_interrupts = 0, blamed_on_busy = 0;
  std::map<std::string, uint64_t> others;  // wakers that were no interrupt
  for (const Event& event : ReadTrace(dir.path())) {
    const auto* wakeup = std::get_if<format::SchedWakeup>(&event.record.payload);
    if (wakeup == nullptr || wakeup->woken_tid != static_cast<uint32_t>(reader_tid)) continue;
    ++wakeups;
    const bool interrupt = wakeup->context == format::WakerContext::kHardIrq ||
                           wakeup->context == format::WakerContext::kSoftIrq;
    from_interrupts += interrupt;
    if (!interrupt) ++others[fmt::format("tid {} context {}", event.record.tid, static_cast<int>(wakeup->context))];
    blamed_on_busy += wakeup->context == format::WakerContext::kTask &&
                      busy_tids.contains(event.record.tid);
  }
  // Each read that slept was woken once, by the disk's interrupt, also one
  // whose completion came from another CPU while the reader was still
  // switching out (racing_wakeups in sched.bpf.c); the one other wakeup is
  // the go line's. busy, whichever task it interrupted, never woke anyone.
  const pid_t slept = reader.ReadTid();
  ASSERT_GT(slept, 0) << "no read waited for the disk";
  std::string other_wakers;
  for (const auto& [who, n] : others) other_wakers += fmt::format(" {} ×{};", who, n);
  EXPECT_EQ(from_interrupts, static_cast<uint64_t>(slept)) << "others:" << other_wakers;
  EXPECT_EQ(wakeups, static_cast<uint64_t>(slept) + 1) << "others:" << other_wakers;
  EXPECT_EQ(blamed_on_busy, 0u);
}

TEST(CpuHoldersTest, MigrationOfAWaitingTargetIsRecorded) {
  LOUPE_REQUIRE_PRIVILEGES();
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs";
  testing::TempDir dir;
  Forked compressor(Compressor);
  ASSERT_GT(compressor.ReadTid(), 0);
  // A traced thread spinning on CPU 0 next to bg_compress: often runnable.
  Forked target([](int fd, int) {
    PinTo(0, 0);
    Report(fd, Gettid());
    Spin(3'000'000'000);
  });
  const pid_t tid = target.ReadTid();
  ASSERT_GT(tid, 0);
  std::unique_ptr<Session> session = StartSession(dir.path(), target.pid());
  ASSERT_NE(session, nullptr);
  usleep(200'000);
  PinTo(tid, 1);
  usleep(200'000);
  ASSERT_TRUE(session->Stop().ok());

  uint64_t moved = 0;
  for (const Event& event : ReadTrace(dir.path())) {
    const auto* migrate = std::get_if<format::SchedMigrate>(&event.record.payload);
    if (migrate != nullptr && event.record.tid == static_cast<uint32_t>(tid)) {
      moved += migrate->orig_cpu == 0 && migrate->dest_cpu == 1;
    }
  }
  EXPECT_GE(moved, 1u);
}

}  // namespace
}  // namespace loupe::session
