// The BPF pipeline end to end on a real thread: the sched program built by
// the CMake function loads, attaches to the scheduler tracepoint, filters by
// target, and delivers exactly one record per context switch of the
// target thread, as the kernel's own per-thread counters count them.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "daemon/bpf/ring_buffer.h"
#include "daemon/bpf/skeleton.h"
#include "daemon/symbols/kallsyms_scan.h"
#include "sched.skel.h"
#include "shared/records.h"
#include "tests/support/privileged.h"
#include "tests/support/proc_counters.h"

namespace loupe::bpf {
namespace {

using SchedSkeleton = Skeleton<loupe_sched, loupe_sched__open, loupe_sched__load,
                               loupe_sched__attach, loupe_sched__destroy>;

// The sched programs of this kernel's flavour, loaded and attached for the
// target `tgid`.
absl::StatusOr<SchedSkeleton> AttachFor(uint32_t tgid) {
  absl::StatusOr<SchedSkeleton> skel = SchedSkeleton::Open("sched");
  if (!skel.ok()) return skel.status();
  // Only the BTF tracepoint set: this kernel has it. Not the flavour that
  // reads the preempt count, which needs it in kallsyms.
  bpf_program* program;
  bpf_object__for_each_program(program, (*skel)->obj) {
    const std::string_view name = bpf_program__name(program);
    bpf_program__set_autoload(program, !name.ends_with("_raw") && name.find("_pcnt") == std::string_view::npos);
  }
  if (absl::Status loaded = skel->Load(); !loaded.ok()) return loaded;
  // Set between load and attach, as a session does: switch-out kernel
  // stacks then start inside __schedule, the tracer's frames left out.
  const std::optional<symbols::TextRange> schedule = symbols::KallsymsFunctionRange("__schedule");
  if (!schedule) return absl::NotFoundError("__schedule's address is not in kallsyms for root");
  (*skel)->bss->cfg_schedule_start = schedule->first;
  (*skel)->bss->cfg_schedule_end = schedule->second;
  const uint8_t yes = 1;
  if (bpf_map__update_elem((*skel)->maps.target_tgids, &tgid, sizeof tgid, &yes, sizeof yes,
                           BPF_ANY) != 0) {
    return absl::InternalError("cannot add the target");
  }
  if (absl::Status attached = skel->Attach(); !attached.ok()) return attached;
  return skel;
}

char ThreadState(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '?' : text[paren + 2];
}

TEST(SchedSwitchTest, OneRecordPerContextSwitchOfTheTarget) {
  LOUPE_REQUIRE_PRIVILEGES();
  const uint32_t tgid = static_cast<uint32_t>(getpid());
  absl::StatusOr<SchedSkeleton> skel = AttachFor(tgid);
  ASSERT_TRUE(skel.ok()) << skel.status();
  const std::optional<symbols::TextRange> schedule = symbols::KallsymsFunctionRange("__schedule");
  ASSERT_TRUE(schedule.has_value());

  std::atomic<pid_t> worker_tid = 0;
  int release[2], done[2];
  ASSERT_EQ(pipe(release), 0);
  ASSERT_EQ(pipe(done), 0);
  std::thread worker([&] {
    worker_tid = static_cast<pid_t>(syscall(SYS_gettid));
    for (int i = 0; i < 50; ++i) usleep(200);
    char c = 'd';
    ASSERT_EQ(write(done[1], &c, 1), 1);
    ASSERT_EQ(read(release[0], &c, 1), 1);  // parked: its counters hold still
  });
  char c;
  ASSERT_EQ(read(done[0], &c, 1), 1);
  const pid_t tid = worker_tid;
  while (ThreadState(tid) != 'S') usleep(1000);
  const uint64_t expected = testing::ContextSwitches(getpid(), tid);

  uint64_t switched_out = 0, unnamed_sides = 0, outside_schedule = 0;
  auto ring =
      RingBuffer::Create(bpf_map__fd((*skel)->maps.events), [&](std::span<const uint8_t> bytes) {
        loupe_record_header hdr;
        ASSERT_GE(bytes.size(), sizeof hdr);
        std::memcpy(&hdr, bytes.data(), sizeof hdr);
        ASSERT_EQ(hdr.size, bytes.size());
        if (hdr.type != LOUPE_REC_SCHED_SWITCH) return;
        loupe_sched_switch rec{};
        std::memcpy(&rec, bytes.data(), bytes.size());
        if (rec.prev_tid == static_cast<uint32_t>(worker_tid.load())) {
          EXPECT_GT(rec.kernel_depth, 0) << "switch-out without a stack";
          const uint64_t innermost = rec.frames[rec.user_depth];
          if (rec.kernel_depth > 0 &&
              (innermost < schedule->first || innermost >= schedule->second)) {
            ++outside_schedule;
          }
        }
        // Switches between other processes are recorded too while a
        // target waits for that CPU: their sides are named, targets never.
        const bool prev_named = rec.prev_comm[0] != '\0';
        const bool next_named = rec.next_comm[0] != '\0';
        if (prev_named != (rec.prev_tgid != tgid && rec.prev_tid != 0)) ++unnamed_sides;
        if (next_named != (rec.next_tgid != tgid && rec.next_tid != 0)) ++unnamed_sides;
        if (rec.prev_tid == static_cast<uint32_t>(tid)) ++switched_out;
      });
  ASSERT_TRUE(ring.ok());
  ASSERT_TRUE((*ring)->Drain().ok());

  ASSERT_EQ(write(release[1], &c, 1), 1);
  worker.join();
  EXPECT_GE(expected, 50u);
  EXPECT_EQ(switched_out, expected);
  EXPECT_EQ(unnamed_sides, 0u) << "a non-target side without its name, or a target with one";
  EXPECT_EQ(outside_schedule, 0u) << "switch-out kernel stacks that do not start in __schedule";

  uint64_t ring_full = 0;
  const uint32_t key = LOUPE_CNT_RING_FULL_SCHED;
  std::vector<uint64_t> per_cpu(libbpf_num_possible_cpus());
  ASSERT_EQ(bpf_map__lookup_elem((*skel)->maps.counters, &key, sizeof key, per_cpu.data(),
                                 per_cpu.size() * sizeof(uint64_t), 0),
            0);
  for (uint64_t v : per_cpu) ring_full += v;
  EXPECT_EQ(ring_full, 0u);
}

// A process's last thread exits and leaves its CPU for good to a task that
// is no target (here: idle, or whatever runs there): that last switch is
// recorded, after the exit record, and only then is the process no target.
TEST(SchedSwitchTest, AnExitingProcesssLastSwitchIsRecorded) {
  LOUPE_REQUIRE_PRIVILEGES();
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    close(go[1]);
    _exit(read(go[0], &c, 1) == 1 ? 0 : 1);
  }
  close(go[0]);
  const uint32_t tgid = static_cast<uint32_t>(child);
  absl::StatusOr<SchedSkeleton> skel = AttachFor(tgid);
  ASSERT_TRUE(skel.ok()) << skel.status();
  ASSERT_EQ(write(go[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(go[1]);

  bool exited = false, dead_switch = false, dead_switch_after_exit = false;
  auto ring =
      RingBuffer::Create(bpf_map__fd((*skel)->maps.events), [&](std::span<const uint8_t> bytes) {
        loupe_record_header hdr;
        std::memcpy(&hdr, bytes.data(), sizeof hdr);
        if (hdr.type == LOUPE_REC_THREAD_EXIT) {
          loupe_thread_exit rec{};
          std::memcpy(&rec, bytes.data(), std::min(bytes.size(), sizeof rec));
          if (rec.tid == tgid) exited = true;
        } else if (hdr.type == LOUPE_REC_SCHED_SWITCH) {
          loupe_sched_switch rec{};
          std::memcpy(&rec, bytes.data(), std::min(bytes.size(), sizeof rec));
          if (rec.prev_tid == tgid && (rec.prev_state & LOUPE_TASK_DEAD) != 0) {
            dead_switch = true;
            dead_switch_after_exit = exited;
          }
        }
      });
  ASSERT_TRUE(ring.ok());
  ASSERT_TRUE((*ring)->Drain().ok());
  EXPECT_TRUE(exited);
  EXPECT_TRUE(dead_switch) << "the exited process's last switch is missing";
  EXPECT_TRUE(dead_switch_after_exit);
  uint8_t value;
  EXPECT_NE(bpf_map__lookup_elem((*skel)->maps.target_tgids, &tgid, sizeof tgid, &value,
                                 sizeof value, 0),
            0)
      << "a process that is gone stays a target";
}

}  // namespace
}  // namespace loupe::bpf
