#include "daemon/bpf/asleep_user_stacks.h"

#include <fmt/format.h>
#include <sys/uio.h>

#include "daemon/base/status_util.h"

namespace loupe::bpf {
namespace {

// A process's memory, read through the kernel as a debugger would, and the
// session's rows (or, without tables, frame pointers everywhere).
class ProcessStackSource : public UserStackSource {
 public:
  ProcessStackSource(uint32_t tgid, const UnwindMaps* tables) : tgid_(tgid), tables_(tables) {}

  std::optional<loupe_unwind_mapping> MappingAt(uint64_t pc) override {
    if (tables_ != nullptr) return tables_->MappingAt(tgid_, pc);
    return loupe_unwind_mapping{.start = 0, .end = UINT64_MAX};
  }
  std::optional<loupe_unwind_row> RowAt(const loupe_unwind_mapping& mapping,
                                        uint32_t address) override {
    return tables_ != nullptr ? tables_->RowAt(mapping, address) : std::nullopt;
  }
  std::optional<uint64_t> ReadWord(uint64_t address) override {
    uint64_t word = 0;
    const iovec local{.iov_base = &word, .iov_len = sizeof word};
    const iovec remote{.iov_base = reinterpret_cast<void*>(address), .iov_len = sizeof word};
    if (process_vm_readv(static_cast<pid_t>(tgid_), &local, 1, &remote, 1, 0) !=
        static_cast<ssize_t>(sizeof word)) {
      return std::nullopt;
    }
    return word;
  }

 private:
  uint32_t tgid_;
  const UnwindMaps* tables_;
};

}  // namespace

void AsleepUserStacks::Prepare() {
  if (unavailable_ || reader_ != nullptr) return;
  absl::StatusOr<std::unique_ptr<ThreadRegsReader>> loaded = ThreadRegsReader::Load();
  if (loaded.ok()) {
    reader_ = *std::move(loaded);
  } else {
    Fail(loaded.status());
  }
}

void AsleepUserStacks::Fail(const absl::Status& status) {
  unavailable_ = true;
  notes_.push_back(
      fmt::format("threads asleep when tracing began have their kernel stack only: {}",
                  MessageOf(status)));
}

std::optional<WalkedStack> AsleepUserStacks::Walk(const UnwindMaps* tables, uint32_t tgid,
                                                  uint32_t tid) {
  Prepare();
  if (unavailable_) return std::nullopt;
  absl::StatusOr<std::optional<loupe_thread_state>> before = reader_->Read(tid);
  if (!before.ok()) {
    Fail(before.status());
    return std::nullopt;
  }
  if (!before->has_value()) return std::nullopt;
  ProcessStackSource source(tgid, tables);
  WalkedStack stack = WalkUserStack(**before, source);
  absl::StatusOr<std::optional<loupe_thread_state>> after = reader_->Read(tid);
  if (!after.ok() || !after->has_value() || (*after)->switches != (**before).switches) {
    return std::nullopt;
  }
  return stack;
}

}  // namespace loupe::bpf
