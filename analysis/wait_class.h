// Why a thread was blocked, decided once per off-CPU interval from its own
// switch-out: the task state and the kernel and user stacks at that moment.
#ifndef LOUPE_ANALYSIS_WAIT_CLASS_H_
#define LOUPE_ANALYSIS_WAIT_CLASS_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "analysis/stack_profile.h"

namespace loupe::analysis {

enum class WaitClass : uint8_t {
  kLock,        // a futex taken by a lock (mutex, rwlock)
  kCondition,   // a futex of a condition variable or semaphore; an eventfd (a semaphore too)
  kFutex,       // a futex with no user stack to tell which
  kBlockIo,     // waiting for the block layer
  kPipeSocket,  // reading or writing a pipe, socket or terminal
  kPoll,        // poll, select, epoll, io_uring completions
  kSleep,       // nanosleep and other timed sleeps
  kPageFault,   // a page fault or memory reclaim
  kTracer,      // inside the kernel's uprobe handling: the tracer's cost, not the application's
  kStopped,     // stopped by a signal (SIGSTOP), a debugger, or frozen (cgroup freezer)
  kChild,       // waitpid, wait4, waitid: for a child process to exit or stop
  kSignal,      // sigwaitinfo, sigtimedwait, sigsuspend
  // Asleep when recording began: the switch-out that would tell why came
  // before the trace (its state is then 0, which no traced sleep has).
  kAsleepAtStart,
  kOther,
};
inline constexpr int kWaitClassCount = static_cast<int>(WaitClass::kOther) + 1;

std::string_view WaitClassName(WaitClass wait);  // "lock", "pipe_socket", ...
// How a sentence says it: "on a lock", "reading a pipe or socket", ...
std::string_view WaitClassPhrase(WaitClass wait);

struct Classified {
  WaitClass wait = WaitClass::kOther;
  int deciding_frame = -1;  // index into the kernel frames of the one that decided
};

// `kernel` and `user` innermost first (tracer frames already left out).
Classified ClassifyWait(uint32_t prev_state, std::span<const NamedFrame> kernel,
                        std::span<const NamedFrame> user);

// A stack's frames by side, each innermost first (tracer frames left out).
struct SplitStack {
  std::vector<NamedFrame> kernel, user;
};
SplitStack SplitFrames(const StackProfile& stacks, uint32_t stack);

// The wait of one blocked interval from its switch-out's state and stacks
// (a StackProfile id): the report and the exports must name a wait alike.
WaitClass ClassifyStack(const StackProfile& stacks, uint32_t stack, uint32_t prev_state);

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_WAIT_CLASS_H_
