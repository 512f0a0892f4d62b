#include "analysis/wait_class.h"

#include <array>

namespace loupe::analysis {
namespace {

using Patterns = std::initializer_list<std::string_view>;

bool Contains(std::string_view function, Patterns patterns) {
  for (std::string_view pattern : patterns) {
    if (function.find(pattern) != std::string_view::npos) return true;
  }
  return false;
}

// Kernel functions by what they wait for. Order matters: a page fault that
// waits for the disk is a page fault, a tracer stall inside a futex call is
// the tracer's, a writer waiting for a pipe's mutex waits for a lock.
struct KernelRule {
  WaitClass wait;
  Patterns functions;
};
const KernelRule kKernelRules[] = {
    // Frozen by the cgroup freezer (v1's __refrigerator, v2's trap) or a
    // suspend: held, like a stopped thread, whatever it was doing.
    {WaitClass::kStopped, {"__refrigerator", "do_freezer_trap"}},
    {WaitClass::kTracer, {"uprobe", "handle_swbp", "uretprobe"}},
    {WaitClass::kPageFault,
     {"exc_page_fault", "do_user_addr_fault", "handle_mm_fault", "__do_fault", "filemap_fault",
      "do_swap_page", "__alloc_pages_slowpath", "try_to_free_pages", "shrink_node",
      "do_read_fault", "do_fault"}},
    // The kernel's own locks (an inode's rwsem taken by a write, a
    // driver's mutex) and file locks (flock, fcntl): a lock, whoever holds it.
    {WaitClass::kLock,
     {"mutex_lock", "rt_mutex_slowlock", "rwsem_down_", "percpu_rwsem_wait", "percpu_down_write",
      // flock's wait is exported; fcntl's (F_SETLKW, lockf, OFD locks) is
      // inlined into fcntl_setlk on some kernels.
      "locks_lock_inode_wait", "flock_lock_inode_wait", "posix_lock_inode_wait",
      "do_lock_file_wait", "fcntl_setlk"}},
    {WaitClass::kFutex, {"futex"}},
    // Not "do_wait": completions wait in do_wait_for_common. A vfork
    // (posix_spawn, system, popen) waits for its child to exec or exit, in
    // wait_for_vfork_done, inlined into kernel_clone (the clone's other
    // waits, for locks and memory, are decided by the rules above).
    {WaitClass::kChild,
     {"kernel_wait4", "kernel_waitid", "sys_wait4", "sys_waitid", "wait_for_vfork_done",
      "kernel_clone"}},
    {WaitClass::kPoll, {"ep_poll", "do_epoll_wait", "do_sys_poll", "do_poll", "do_select",
                        "core_sys_select", "io_cqring_wait"}},
    // An eventfd is a counter one thread bumps for another to wait on: a
    // semaphore in all but name.
    {WaitClass::kCondition, {"eventfd_read"}},
    {WaitClass::kSignal, {"do_sigtimedwait", "sigsuspend"}},
    {WaitClass::kSleep, {"do_nanosleep", "hrtimer_nanosleep", "clock_nanosleep", "msleep",
                         "do_sys_pause", "sys_pause"}},
    {WaitClass::kPipeSocket,
     {"pipe_read", "pipe_write", "wait_for_partner", "unix_stream", "unix_dgram", "sk_wait_data",
      "tcp_recvmsg", "inet_csk_accept", "sk_stream_wait", "skb_wait_for_more_packets",
      "n_tty_read", "tty_read", "udp_recvmsg"}},
    {WaitClass::kBlockIo, {"io_schedule", "blk_", "bio_", "folio_wait", "wait_on_page",
                           "jbd2", "file_write_and_wait", "__filemap_fdatawait"}},
};

// User functions that say what a futex belongs to, innermost first wins.
// glibc's own waiting helpers (__futex_abstimed_wait_common, do_futex_wait)
// serve condition variables, semaphores, rwlocks, timed mutexes and joins
// alike, so they decide nothing: the frame that called them does.
const Patterns kLockFunctions = {"mutex_lock", "lll_lock", "rwlock", "mutex_timedlock",
                                 "clocklock", "std::mutex", "lock_slow", "spin_lock",
                                 "shared_mutex"};
// A future's result, C++20's atomic waits (latch, barrier, semaphore) and
// joins wait for another thread's signal as a condition variable does.
const Patterns kConditionFunctions = {"pthread_cond_", "sem_wait", "sem_timedwait",
                                      "sem_clockwait", "condition_variable",
                                      "pthread_barrier_wait", "pthread_join", "clockjoin",
                                      "__future_base", "__atomic_futex_unsigned",
                                      "__platform_wait", "__atomic_wait", "__atomic_semaphore"};

// Locks a language runtime builds on a condition variable: while one of
// these is on the stack the thread is taking that lock, whatever waits
// innermost. Java's monitors (synchronized) and HotSpot's own mutexes;
// CPython's interpreter lock, taken back in PyEval_RestoreThread (its
// take_gil is static, unnamed in a stripped build). Not Object.wait()
// (ObjectMonitor::wait), a condition, nor anything on the stack throughout
// a locked section (Ruby's rb_mutex_synchronize).
const Patterns kRuntimeLockFunctions = {"ObjectMonitor::enter", "ObjectMonitor::EnterI",
                                        "ObjectMonitor::ReenterI", "Mutex::lock_contended",
                                        "take_gil", "PyEval_RestoreThread", "PyEval_AcquireThread"};

WaitClass FutexKind(std::span<const NamedFrame> user) {
  for (const NamedFrame& frame : user) {
    if (Contains(frame.function, kRuntimeLockFunctions)) return WaitClass::kLock;
  }
  for (const NamedFrame& frame : user) {
    if (Contains(frame.function, kLockFunctions)) return WaitClass::kLock;
    if (Contains(frame.function, kConditionFunctions)) return WaitClass::kCondition;
  }
  return WaitClass::kFutex;
}

constexpr std::array<std::string_view, kWaitClassCount> kNames = {
    "lock", "condition", "futex", "block_io", "pipe_socket", "poll",
    "sleep", "page_fault", "tracer", "stopped", "child", "signal", "asleep_at_start", "other",
};
constexpr std::array<std::string_view, kWaitClassCount> kPhrases = {
    "on a lock",
    "waiting on a condition variable or semaphore",
    "on a futex",
    "on block I/O",
    "on a pipe or socket",
    "in poll/epoll/io_uring",
    "sleeping",
    "in page faults",
    "inside the tracer's uprobe handling (Loupe's own cost, not the application's)",
    "stopped by a signal (SIGSTOP), a debugger or a frozen cgroup",
    "waiting for a child process",
    "waiting for a signal",
    "asleep since before the trace began (the switch-out that tells why is not in it)",
    "off CPU",
};

}  // namespace

std::string_view WaitClassName(WaitClass wait) { return kNames[static_cast<int>(wait)]; }
std::string_view WaitClassPhrase(WaitClass wait) { return kPhrases[static_cast<int>(wait)]; }

Classified ClassifyWait(uint32_t prev_state, std::span<const NamedFrame> kernel,
                        std::span<const NamedFrame> user) {
  // The stacks say more than S or D (D without a telling stack is "other");
  // a stopped or frozen thread is held, whatever it was doing.
  if ((format::TaskState(prev_state) &
       (format::kTaskStopped | format::kTaskTraced | format::kTaskFrozen)) != 0) {
    return {WaitClass::kStopped, -1};
  }
  if (format::TaskState(prev_state) == 0 && kernel.empty() && user.empty()) {
    return {WaitClass::kAsleepAtStart, -1};
  }
  for (const KernelRule& rule : kKernelRules) {
    for (size_t i = 0; i < kernel.size(); ++i) {
      if (!Contains(kernel[i].function, rule.functions)) continue;
      const WaitClass wait = rule.wait == WaitClass::kFutex ? FutexKind(user) : rule.wait;
      return {wait, static_cast<int>(i)};
    }
  }
  // Without kernel frames the user stack still tells a futex call apart.
  if (kernel.empty()) {
    const WaitClass wait = FutexKind(user);
    if (wait != WaitClass::kFutex) return {wait, -1};
    for (const NamedFrame& frame : user) {
      if (Contains(frame.function, {"nanosleep", "usleep", "sleep"})) return {WaitClass::kSleep, -1};
      if (Contains(frame.function, {"epoll_wait", "poll", "select"})) return {WaitClass::kPoll, -1};
      if (Contains(frame.function, {"waitpid", "wait4", "waitid"})) return {WaitClass::kChild, -1};
      if (Contains(frame.function, {"sigwait", "sigtimedwait", "sigsuspend"})) {
        return {WaitClass::kSignal, -1};
      }
    }
  }
  return {WaitClass::kOther, -1};
}

SplitStack SplitFrames(const StackProfile& stacks, uint32_t stack) {
  SplitStack split;
  for (NamedFrame& frame : stacks.StackFrames(stack)) {
    (frame.kernel ? split.kernel : split.user).push_back(std::move(frame));
  }
  return split;
}

WaitClass ClassifyStack(const StackProfile& stacks, uint32_t stack, uint32_t prev_state) {
  const SplitStack split = SplitFrames(stacks, stack);
  return ClassifyWait(prev_state, split.kernel, split.user).wait;
}

}  // namespace loupe::analysis
