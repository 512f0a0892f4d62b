// The saved user registers (and pending %return probe returns) of a thread
// that is not running, read through a BPF task iterator given its tid
// (bpf/thread_regs.bpf.c; Linux 6.1+ filters a task iterator by tid).
#ifndef LOUPE_DAEMON_BPF_THREAD_REGS_H_
#define LOUPE_DAEMON_BPF_THREAD_REGS_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "shared/records.h"

struct loupe_thread_regs;

namespace loupe::bpf {

class ThreadRegsReader {
 public:
  static absl::StatusOr<std::unique_ptr<ThreadRegsReader>> Load();
  ~ThreadRegsReader();

  // nullopt: the thread runs (its saved registers are not where it is) or
  // is gone; an error where the kernel cannot iterate one thread.
  absl::StatusOr<std::optional<loupe_thread_state>> Read(uint32_t tid) const;

 private:
  explicit ThreadRegsReader(loupe_thread_regs* skeleton) : skeleton_(skeleton) {}
  loupe_thread_regs* skeleton_;
};

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_THREAD_REGS_H_
