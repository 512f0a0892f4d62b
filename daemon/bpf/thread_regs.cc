#include "daemon/bpf/thread_regs.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/base/scoped_fd.h"
#include "thread_regs.skel.h"

namespace loupe::bpf {

absl::StatusOr<std::unique_ptr<ThreadRegsReader>> ThreadRegsReader::Load() {
  loupe_thread_regs* skeleton = loupe_thread_regs__open_and_load();
  if (skeleton == nullptr) {
    return absl::InternalError(
        fmt::format("load BPF program thread_regs: {}", std::strerror(errno)));
  }
  return std::unique_ptr<ThreadRegsReader>(new ThreadRegsReader(skeleton));
}

ThreadRegsReader::~ThreadRegsReader() { loupe_thread_regs__destroy(skeleton_); }

absl::StatusOr<std::optional<loupe_thread_state>> ThreadRegsReader::Read(uint32_t tid) const {
  union bpf_iter_link_info info = {};
  info.task.tid = tid;
  LIBBPF_OPTS(bpf_iter_attach_opts, options, .link_info = &info, .link_info_len = sizeof info);
  bpf_link* link = bpf_program__attach_iter(skeleton_->progs.read_thread_state, &options);
  if (link == nullptr) {
    return absl::InternalError(
        fmt::format("iterate thread {} with BPF: {}", tid, std::strerror(errno)));
  }
  const ScopedFd iterator(bpf_iter_create(bpf_link__fd(link)));
  const int create_errno = errno;
  loupe_thread_state state{};
  const ssize_t got = iterator.get() >= 0 ? read(iterator.get(), &state, sizeof state) : -1;
  const int read_errno = errno;
  bpf_link__destroy(link);
  if (iterator.get() < 0) {
    return absl::InternalError(
        fmt::format("iterate thread {} with BPF: {}", tid, std::strerror(create_errno)));
  }
  if (got < 0) {
    return absl::InternalError(
        fmt::format("read thread {}'s registers: {}", tid, std::strerror(read_errno)));
  }
  if (got == 0) return std::nullopt;
  // A kernel that ignores the tid (before 6.1) iterates every task from the first.
  if (got != sizeof state || state.tid != tid) {
    return absl::FailedPreconditionError(
        "this kernel cannot iterate one thread with BPF (Linux 6.1+)");
  }
  return state;
}

}  // namespace loupe::bpf
