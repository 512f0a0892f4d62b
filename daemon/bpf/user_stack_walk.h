// The user stack of a thread that is not running, walked from user space as
// bpf/include/unwind.bpf.h walks the running thread's in BPF: the same rows,
// the same rules, from the registers its kernel entry saved. For threads
// asleep through a whole trace, whose stack no switch-out recorded.
#ifndef LOUPE_DAEMON_BPF_USER_STACK_WALK_H_
#define LOUPE_DAEMON_BPF_USER_STACK_WALK_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "shared/records.h"

namespace loupe::bpf {

// Where a walk finds its rows and the thread's memory.
class UserStackSource {
 public:
  virtual ~UserStackSource() = default;
  // The executable mapping holding `pc` (row_count 0: walked by frame pointers).
  virtual std::optional<loupe_unwind_mapping> MappingAt(uint64_t pc) = 0;
  // The last row at or before `address` (the file's) in the mapping's run.
  virtual std::optional<loupe_unwind_row> RowAt(const loupe_unwind_mapping& mapping,
                                                uint32_t address) = 0;
  virtual std::optional<uint64_t> ReadWord(uint64_t address) = 0;
};

struct WalkedStack {
  // Innermost first, as BPF writes them: LOUPE_FRAME_EXACT marks a frame a
  // signal interrupted (where the code was, not a return address).
  std::vector<uint64_t> frames;
  bool stopped = false;  // ended before the stack's bottom: its callers are unknown
};

WalkedStack WalkUserStack(const loupe_thread_state& thread, UserStackSource& source);

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_USER_STACK_WALK_H_
