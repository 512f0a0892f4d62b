#include "daemon/session/asleep_all_along.h"

#include <fmt/format.h>

#include <charconv>

#include "absl/container/flat_hash_map.h"
#include "daemon/base/read_file.h"
#include "daemon/format/record.h"

namespace loupe::session {
namespace {

// "function+0xoffset/0xsize" -> (function, offset).
std::optional<std::pair<std::string_view, uint64_t>> SplitFrame(std::string_view frame) {
  const size_t plus = frame.rfind('+');
  if (plus == std::string_view::npos || frame.substr(plus + 1).substr(0, 2) != "0x")
    return std::nullopt;
  std::string_view offset = frame.substr(plus + 3);
  offset = offset.substr(0, offset.find('/'));
  uint64_t value = 0;
  const auto [end, error] =
      std::from_chars(offset.data(), offset.data() + offset.size(), value, 16);
  if (error != std::errc() || end != offset.data() + offset.size()) return std::nullopt;
  return std::pair(frame.substr(0, plus), value);
}

}  // namespace

void SetUserStack(const bpf::WalkedStack& stack, Asleep* asleep) {
  asleep->user_frames.clear();
  asleep->exact_user_frames.clear();
  for (const uint64_t frame : stack.frames) {
    if ((frame & LOUPE_FRAME_EXACT) != 0) {
      asleep->exact_user_frames.push_back(static_cast<uint16_t>(asleep->user_frames.size()));
    }
    asleep->user_frames.push_back(frame & ~LOUPE_FRAME_EXACT);
  }
  asleep->user_stack_stopped = stack.stopped;
}

uint32_t TaskStateOfLetter(char letter) {
  switch (letter) {
    case 'S':
      return 0x1;  // TASK_INTERRUPTIBLE
    case 'D':
      return 0x2;  // TASK_UNINTERRUPTIBLE
    case 'I':
      return 0x402;  // TASK_IDLE: uninterruptible, not counted as load
    case 'T':
      return format::kTaskStopped;
    case 't':
      return format::kTaskTraced;
    default:
      return 0;
  }
}

std::optional<Asleep> ReadAsleep(uint32_t pid, uint32_t tid, bool with_kernel_stack) {
  const std::string dir = fmt::format("/proc/{}/task/{}", pid, tid);
  absl::StatusOr<std::string> stat = ReadWholeFile(dir + "/stat");
  if (!stat.ok()) return std::nullopt;
  // "tid (comm) S ...": the comm may hold spaces and parentheses.
  const size_t close = stat->rfind(')');
  if (close == std::string::npos || close + 2 >= stat->size()) return std::nullopt;
  Asleep asleep{.prev_state = TaskStateOfLetter((*stat)[close + 2])};
  if (asleep.prev_state == 0) return std::nullopt;
  if (!with_kernel_stack) return asleep;
  // "[<0>] function+0x60/0x90" per line, innermost first.
  if (absl::StatusOr<std::string> stack = ReadWholeFile(dir + "/stack"); stack.ok()) {
    std::string_view rest = *stack;
    while (!rest.empty()) {
      std::string_view line = rest.substr(0, rest.find('\n'));
      rest.remove_prefix(std::min(rest.size(), line.size() + 1));
      if (const size_t space = line.find(' '); space != std::string_view::npos) {
        asleep.kernel_frames.emplace_back(line.substr(space + 1));
      }
    }
  }
  return asleep;
}

std::vector<std::vector<uint64_t>> KernelAddresses(
    const std::vector<std::vector<std::string>>& stacks, std::string_view kallsyms) {
  absl::flat_hash_map<std::string_view, uint64_t> wanted;
  for (const auto& stack : stacks) {
    for (const std::string& frame : stack) {
      if (const auto split = SplitFrame(frame)) wanted.try_emplace(split->first, 0);
    }
  }
  while (!kallsyms.empty() && !wanted.empty()) {
    std::string_view line = kallsyms.substr(0, kallsyms.find('\n'));
    kallsyms.remove_prefix(std::min(kallsyms.size(), line.size() + 1));
    // "ffffffff81000000 T name[\t[module]]"
    const size_t first = line.find(' '), second = line.find(' ', first + 1);
    if (first == std::string_view::npos || second == std::string_view::npos) continue;
    std::string_view name = line.substr(second + 1);
    name = name.substr(0, name.find('\t'));
    auto it = wanted.find(name);
    if (it == wanted.end() || it->second != 0) continue;  // the first of a name wins
    uint64_t address = 0;
    std::from_chars(line.data(), line.data() + first, address, 16);
    it->second = address;
  }
  std::vector<std::vector<uint64_t>> out(stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i) {
    for (const std::string& frame : stacks[i]) {
      const auto split = SplitFrame(frame);
      if (!split) continue;
      const auto it = wanted.find(split->first);
      if (it != wanted.end() && it->second != 0) out[i].push_back(it->second + split->second);
    }
  }
  return out;
}

std::vector<OwnedEvent> AsleepStacks(std::span<const Asleep* const> asleep,
                                     std::string_view kallsyms) {
  std::vector<std::vector<std::string>> kernel_stacks;
  for (const Asleep* thread : asleep) kernel_stacks.push_back(thread->kernel_frames);
  const std::vector<std::vector<uint64_t>> addresses = KernelAddresses(kernel_stacks, kallsyms);
  std::vector<OwnedEvent> stacks(asleep.size());
  for (size_t i = 0; i < asleep.size(); ++i) {
    OwnedEvent& event = stacks[i];
    event.frames = asleep[i]->user_frames;
    if (!asleep[i]->exact_user_frames.empty()) {
      event.extras().exact_frames = asleep[i]->exact_user_frames;
    }
    // Marked after the frames kept, as a walk in BPF that stopped is.
    if (asleep[i]->user_stack_stopped && !event.frames.empty()) {
      event.frames.push_back(format::kUnwindStoppedFrame);
    }
    event.user_depth = static_cast<uint16_t>(event.frames.size());
    event.frames.insert(event.frames.end(), addresses[i].begin(), addresses[i].end());
  }
  return stacks;
}

}  // namespace loupe::session
