// User stacks of a session's threads asleep when recording began: their
// saved registers (thread_regs.h), and a walk of their memory with the
// session's unwind tables (user_stack_walk.h), from user space, since they
// ran no BPF program since their sleep began.
#ifndef LOUPE_DAEMON_BPF_ASLEEP_USER_STACKS_H_
#define LOUPE_DAEMON_BPF_ASLEEP_USER_STACKS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/bpf/thread_regs.h"
#include "daemon/bpf/unwind_maps.h"
#include "daemon/bpf/user_stack_walk.h"

namespace loupe::bpf {

class AsleepUserStacks {
 public:
  // Thread `tid` of `tgid`, asleep, walked with `tables` (null: by frame
  // pointers only): nullopt when it runs, is gone, or ran during the walk
  // (what was read may then be another moment's), or when the kernel
  // cannot say (a note says so, once).
  std::optional<WalkedStack> Walk(const UnwindMaps* tables, uint32_t tgid, uint32_t tid);
  // Loads the task iterator, else the first Walk does (~50 ms: BTF).
  void Prepare();
  std::vector<std::string> TakeNotes() { return std::move(notes_); }

 private:
  // No more walks: a note says why, once.
  void Fail(const absl::Status& status);

  std::unique_ptr<ThreadRegsReader> reader_;
  bool unavailable_ = false;
  std::vector<std::string> notes_;
};

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_ASLEEP_USER_STACKS_H_
