// Blocked intervals classified once from their own switch-out's stacks.
#include "analysis/wait_class.h"

#include <gtest/gtest.h>

namespace loupe::analysis {
namespace {

std::vector<NamedFrame> Frames(std::initializer_list<const char*> names, bool kernel) {
  std::vector<NamedFrame> frames;
  for (const char* name : names) frames.push_back({name, "", 0, kernel});
  return frames;
}

WaitClass Classify(std::initializer_list<const char*> kernel, std::initializer_list<const char*> user,
                   uint32_t state = 1) {
  const std::vector<NamedFrame> k = Frames(kernel, true), u = Frames(user, false);
  return ClassifyWait(state, k, u).wait;
}

TEST(WaitClassTest, FutexesAreLocksOrConditionsByTheirUserStack) {
  const auto futex = {"schedule", "futex_wait_queue", "futex_wait", "do_futex"};
  EXPECT_EQ(Classify(futex, {"__lll_lock_wait", "pthread_mutex_lock", "lookup"}), WaitClass::kLock);
  EXPECT_EQ(Classify(futex, {"__futex_abstimed_wait_common", "pthread_cond_wait", "idle"}),
            WaitClass::kCondition);
  EXPECT_EQ(Classify(futex, {"sem_wait", "consumer"}), WaitClass::kCondition);
  // glibc's waiting helper is shared; the caller above it decides (glibc 2.36's frames).
  EXPECT_EQ(Classify(futex, {"__futex_abstimed_wait_common", "__pthread_rwlock_rdlock_full64",
                             "___pthread_rwlock_rdlock", "read_config"}),
            WaitClass::kLock);
  EXPECT_EQ(Classify(futex, {"__futex_abstimed_wait_common", "__pthread_rwlock_wrlock_full64",
                             "___pthread_rwlock_wrlock", "rebuild_index"}),
            WaitClass::kLock);
  EXPECT_EQ(Classify(futex, {"__futex_abstimed_wait_common", "__futex_clocklock_wait64",
                             "__futex_clocklock64", "__pthread_mutex_clocklock_common",
                             "___pthread_mutex_timedlock", "handle"}),
            WaitClass::kLock);
  EXPECT_EQ(Classify(futex, {"__futex_abstimed_wait_common", "do_futex_wait",
                             "__new_sem_wait_slow64", "consumer"}),
            WaitClass::kCondition);
  EXPECT_EQ(Classify(futex, {"__futex_abstimed_wait_common", "__pthread_clockjoin_ex", "main"}),
            WaitClass::kCondition);
  EXPECT_EQ(Classify(futex, {"__futex_abstimed_wait_common", "custom_wait"}), WaitClass::kFutex);
  // A future's get(), as libstdc++ 12 shows it.
  EXPECT_EQ(Classify(futex, {"syscall",
                             "std::__atomic_futex_unsigned_base::_M_futex_wait_until(unsigned int*, "
                             "unsigned int, bool, std::chrono::duration<long, std::ratio<1l, 1l> >, "
                             "std::chrono::duration<long, std::ratio<1l, 1000000000l> >)",
                             "std::__atomic_futex_unsigned<2147483648u>::_M_load_and_test_until()",
                             "std::__future_base::_State_baseV2::wait()", "std::future<long>::get()",
                             "main"}),
            WaitClass::kCondition);
  EXPECT_EQ(Classify(futex, {}), WaitClass::kFutex);  // no user stack: cannot tell
}

// A runtime's lock waits on a condition variable inside: its own frame
// says lock. Its condition (Object.wait) stays a condition.
TEST(WaitClassTest, LocksRuntimesBuildOnConditionVariablesAreLocks) {
  const auto futex = {"schedule", "futex_wait_queue", "futex_wait", "do_futex"};
  const auto parked = {"__futex_abstimed_wait_common", "___pthread_cond_wait",
                       "os::PlatformEvent::park()"};
  auto above = [&](std::initializer_list<const char*> callers) {
    std::vector<NamedFrame> frames = Frames(parked, false);
    for (const char* caller : callers) frames.push_back({caller, "", 0, false});
    return ClassifyWait(1, Frames(futex, true), frames).wait;
  };
  EXPECT_EQ(above({"ObjectMonitor::EnterI(JavaThread*)", "ObjectMonitor::enter(JavaThread*)",
                   "ObjectSynchronizer::enter(Handle, BasicLock*, JavaThread*)", "Interpreter"}),
            WaitClass::kLock);
  EXPECT_EQ(above({"ObjectMonitor::wait(long, bool, JavaThread*)",
                   "ObjectSynchronizer::wait(Handle, long, JavaThread*)", "JVM_MonitorWait"}),
            WaitClass::kCondition);
  EXPECT_EQ(Classify(futex, {"__futex_abstimed_wait_common", "___pthread_cond_timedwait64",
                             "python3.11+0xf94ee", "PyEval_RestoreThread", "time_sleep"}),
            WaitClass::kLock);
}

TEST(WaitClassTest, TheKernelsLocksAndFileLocksAreLocks) {
  EXPECT_EQ(Classify({"schedule", "schedule_preempt_disabled", "rwsem_down_write_slowpath",
                      "down_write", "ext4_buffered_write_iter", "vfs_write"},
                     {"__libc_pwrite64", "append_log"}),
            WaitClass::kLock);
  EXPECT_EQ(Classify({"schedule", "locks_lock_inode_wait", "__do_sys_flock"}, {"__flock", "reindex"}),
            WaitClass::kLock);
  // F_SETLKW as 6.18 shows it: its wait inlined into fcntl_setlk.
  EXPECT_EQ(Classify({"schedule", "fcntl_setlk", "do_fcntl", "__x64_sys_fcntl"}, {"__GI___fcntl64_nocancel"}),
            WaitClass::kLock);
  // Waiting for the pipe's mutex, not for room in the pipe.
  EXPECT_EQ(Classify({"schedule", "schedule_preempt_disabled", "__mutex_lock.constprop.0",
                      "pipe_write", "vfs_write"},
                     {"write"}),
            WaitClass::kLock);
  // mmap_lock taken by a fault stays a fault; the tracer's own rwsem stays the tracer's.
  EXPECT_EQ(Classify({"schedule", "rwsem_down_read_slowpath", "lock_mm_and_find_vma",
                      "do_user_addr_fault", "exc_page_fault"},
                     {}),
            WaitClass::kPageFault);
  EXPECT_EQ(Classify({"schedule", "rwsem_down_read_slowpath", "handle_swbp"}, {}), WaitClass::kTracer);
}

// SIGSTOP (prev_state 0x104: __TASK_STOPPED with TASK_WAKEKILL) and a
// debugger's stop are their own class, whatever the stacks were.
TEST(WaitClassTest, AStoppedThreadIsStopped) {
  const auto stop = {"schedule", "do_signal_stop", "get_signal", "arch_do_signal_or_restart"};
  EXPECT_EQ(Classify(stop, {"spin_wall", "main"}, 0x104), WaitClass::kStopped);
  EXPECT_EQ(Classify({"schedule", "ptrace_stop"}, {"main"}, 0x8), WaitClass::kStopped);
  EXPECT_EQ(Classify(stop, {"spin_wall", "main"}, 0x1), WaitClass::kOther);
  EXPECT_EQ(WaitClassName(WaitClass::kStopped), "stopped");
}

// A thread frozen by the cgroup freezer is held like a stopped one: by its
// state on Linux 6.1+ (TASK_FROZEN, as a real v1 freeze recorded it), by
// its stack before (D in __refrigerator) and in v2's freezer trap.
TEST(WaitClassTest, AFrozenThreadIsStoppedNotOther) {
  const auto v1 = {"__schedule", "schedule", "__refrigerator", "get_signal",
                   "arch_do_signal_or_restart", "irqentry_exit_to_user_mode"};
  EXPECT_EQ(Classify(v1, {"main"}, 0x8000), WaitClass::kStopped);
  EXPECT_EQ(Classify(v1, {"main"}, 0x2), WaitClass::kStopped);
  EXPECT_EQ(Classify({}, {"main"}, 0x8000), WaitClass::kStopped);
  EXPECT_EQ(Classify({"schedule", "do_freezer_trap", "get_signal"}, {"main"}, 0x1),
            WaitClass::kStopped);
  EXPECT_EQ(WaitClassPhrase(WaitClass::kStopped),
            "stopped by a signal (SIGSTOP), a debugger or a frozen cgroup");
}

// A wait that began before recording did has neither its switch-out's
// state nor its stacks; a traced one without stacks (--offcpu-stacks none)
// still has its state, and is "other".
TEST(WaitClassTest, AWaitBegunBeforeTheTraceSaysSoRatherThanOther) {
  EXPECT_EQ(Classify({}, {}, 0), WaitClass::kAsleepAtStart);
  EXPECT_EQ(WaitClassName(WaitClass::kAsleepAtStart), "asleep_at_start");
  EXPECT_EQ(Classify({}, {}, 1), WaitClass::kOther);
  EXPECT_EQ(Classify({}, {}, 2), WaitClass::kOther);
}

TEST(WaitClassTest, KernelFramesTellIoSleepPollAndFaults) {
  EXPECT_EQ(Classify({"schedule", "pipe_read", "vfs_read"}, {"read"}), WaitClass::kPipeSocket);
  EXPECT_EQ(Classify({"schedule", "unix_stream_read_generic"}, {}), WaitClass::kPipeSocket);
  EXPECT_EQ(Classify({"schedule", "schedule_hrtimeout_range", "ep_poll", "do_epoll_wait"}, {}),
            WaitClass::kPoll);
  EXPECT_EQ(Classify({"schedule", "do_nanosleep", "hrtimer_nanosleep"}, {"nanosleep"}),
            WaitClass::kSleep);
  EXPECT_EQ(Classify({"io_schedule", "folio_wait_bit_common", "filemap_fault", "__do_fault",
                      "handle_mm_fault", "exc_page_fault"},
                     {}, 2),
            WaitClass::kPageFault);  // a fault that waits for the disk is a fault
  EXPECT_EQ(Classify({"io_schedule", "blk_mq_get_tag", "submit_bio"}, {}, 2), WaitClass::kBlockIo);
  EXPECT_EQ(Classify({"schedule"}, {}, 2), WaitClass::kOther);
}

// waitpid, wait4 and waitid wait for a child; a completion (vfork, a
// driver) waits in do_wait_for_common, which is not one.
TEST(WaitClassTest, WaitingForAChildIsItsOwnClass) {
  EXPECT_EQ(Classify({"schedule", "do_wait", "kernel_wait4", "__do_sys_wait4", "do_syscall_64"},
                     {"__GI___wait4", "run_child", "main"}),
            WaitClass::kChild);
  EXPECT_EQ(Classify({"schedule", "do_wait", "kernel_waitid", "__do_sys_waitid"}, {"waitid"}),
            WaitClass::kChild);
  EXPECT_EQ(Classify({}, {"__GI___waitpid", "main"}), WaitClass::kChild);  // no kernel stack
  // posix_spawn, system() and popen() vfork: the parent waits for the exec.
  EXPECT_EQ(Classify({"schedule", "schedule_timeout", "do_wait_for_common",
                      "wait_for_completion_state", "wait_for_vfork_done", "kernel_clone",
                      "__do_sys_clone3"},
                     {"__clone3"}, 0x102),
            WaitClass::kChild);
  EXPECT_EQ(Classify({"schedule", "schedule_timeout", "__wait_for_common",
                      "wait_for_completion_state", "kernel_clone", "__do_sys_clone3"},
                     {"__clone3"}, 0x102),
            WaitClass::kChild);  // as this kernel has it: wait_for_vfork_done inlined
  EXPECT_EQ(Classify({"schedule", "schedule_timeout", "do_wait_for_common", "wait_for_completion"},
                     {}, 2),
            WaitClass::kOther);
  EXPECT_EQ(WaitClassName(WaitClass::kChild), "child");
}

// As this kernel has them: an eventfd read is a semaphore's wait, io_uring's
// completion wait is a poll, sigwaitinfo waits for a signal.
TEST(WaitClassTest, EventfdIoUringAndSignalWaitsSayWhatTheyWaitFor) {
  EXPECT_EQ(Classify({"schedule", "eventfd_read", "vfs_read", "ksys_read"}, {"read", "wait_eventfd"}),
            WaitClass::kCondition);
  EXPECT_EQ(Classify({"schedule", "schedule_hrtimeout_range_clock", "io_cqring_wait",
                      "__do_sys_io_uring_enter"},
                     {"syscall", "wait_uring"}),
            WaitClass::kPoll);
  EXPECT_EQ(Classify({"schedule", "schedule_hrtimeout_range_clock", "do_sigtimedwait.isra.0",
                      "__x64_sys_rt_sigtimedwait"},
                     {"sigwaitinfo", "main"}),
            WaitClass::kSignal);
  EXPECT_EQ(Classify({}, {"__sigtimedwait", "main"}), WaitClass::kSignal);  // no kernel stack
  EXPECT_EQ(WaitClassName(WaitClass::kSignal), "signal");
}

TEST(WaitClassTest, TheTracersOwnUprobeHandlingIsNeverTheApplications) {
  EXPECT_EQ(Classify({"schedule", "rwsem_down_read_slowpath", "uprobe_notify_resume",
                      "exit_to_user_mode_loop"},
                     {"loupe__emit_span_begin", "handle"}),
            WaitClass::kTracer);
  const std::vector<NamedFrame> kernel = Frames({"schedule", "futex_wait_queue"}, true);
  const Classified why = ClassifyWait(1, kernel, {});
  EXPECT_EQ(why.deciding_frame, 1);  // the frame shown with the blocking stack
  EXPECT_EQ(WaitClassName(WaitClass::kPipeSocket), "pipe_socket");
}

}  // namespace
}  // namespace loupe::analysis
