// Target threads asleep when recording begins: their switch-out came
// before, so no record says what they wait for. Read right after recording
// began, /proc says how they sleep: the state (S, D, I, T) and the kernel
// stack, whose "function+0xoffset" lines kallsyms turns back into addresses
// (root sees them), and the user stack is walked from the registers their
// kernel entry saved. Those stacks go with the off_cpu record that ends
// the sleep: at the thread's first switch-in, or where tracing stops for a
// thread asleep through the whole trace (which would else not be listed).
#ifndef LOUPE_DAEMON_SESSION_ASLEEP_ALL_ALONG_H_
#define LOUPE_DAEMON_SESSION_ASLEEP_ALL_ALONG_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/bpf/user_stack_walk.h"
#include "daemon/session/owned_event.h"

namespace loupe::session {

struct Asleep {
  uint32_t prev_state = 0;  // as sched_switch has it: TASK_INTERRUPTIBLE, ...
  // The kernel stack, innermost first: "function+0xoffset" each.
  std::vector<std::string> kernel_frames;
  // The user stack, innermost first, where it could be walked
  // (bpf::AsleepUserStacks); the indices of frames a signal interrupted;
  // whether its callers beyond the last frame are unknown.
  std::vector<uint64_t> user_frames;
  std::vector<uint16_t> exact_user_frames;
  bool user_stack_stopped = false;
  // When the read began, in the trace's clock (CLOCK_MONOTONIC): a thread
  // switched in before had run since its sleep began, and this is a later one.
  uint64_t read_ns = 0;
};

// The thread's sleep from /proc/PID/task/TID, or nullopt when it runs, is
// runnable or is gone. Its kernel stack only `with_kernel_stack`: kernel
// addresses are withheld from a caller other than root, as louped's own
// kernel stacks are (session_options.cc).
std::optional<Asleep> ReadAsleep(uint32_t pid, uint32_t tid, bool with_kernel_stack);

// The stacks of each of `asleep` as a switch-out's are in an off_cpu record
// (user frames, the stopped mark after them, then kernel frames, placed by
// `kallsyms`, the file's text): frames, user depth and exact frames set,
// the record left empty.
std::vector<OwnedEvent> AsleepStacks(std::span<const Asleep* const> asleep,
                                     std::string_view kallsyms);

// A walked stack's frames into `asleep` (LOUPE_FRAME_EXACT marks as exact_user_frames).
void SetUserStack(const bpf::WalkedStack& stack, Asleep* asleep);

// The state letter of /proc/.../stat as a task state, 0 for R and unknown letters.
uint32_t TaskStateOfLetter(char letter);

// "function+0xoffset" frames as kernel addresses, by one pass over kallsyms
// text (the file's format: "ADDRESS TYPE NAME[\t[MODULE]]"); a frame whose
// function is not there (or hidden: all addresses zero) is left out.
std::vector<std::vector<uint64_t>> KernelAddresses(
    const std::vector<std::vector<std::string>>& stacks, std::string_view kallsyms);

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_ASLEEP_ALL_ALONG_H_
