// The kernel's multi-uprobe links (Linux 6.6+): one BPF link for many sites
// of one file, through the raw bpf() call (Debian's libbpf 1.1 predates
// them). Why they matter: removing a uprobe ends with a grace-period wait,
// and a perf-event uprobe waits once per site while the target's threads
// that hit the site block on it; a multi link removes all its sites and
// waits once (tests/bench/attach_stall.sh has the figures).
#ifndef LOUPE_DAEMON_BPF_UPROBE_MULTI_H_
#define LOUPE_DAEMON_BPF_UPROBE_MULTI_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/base/scoped_fd.h"

namespace loupe::bpf {

// The attach type programs must be loaded with to be linked this way; such
// a program can no longer be attached through a perf event.
inline constexpr uint32_t kUprobeMultiAttachType = 48;  // BPF_TRACE_UPROBE_MULTI

// Whether this kernel links uprobes this way (probed once, then cached),
// unless the environment has LOUPE_UPROBE_MULTI=0.
bool UprobeMultiSupported();

struct UprobeMultiSites {
  std::string path;
  std::span<const uint64_t> offsets;
  std::span<const uint64_t> semaphore_offsets;  // 0: none
  std::span<const uint64_t> cookies;
  uint32_t pid = 0;  // 0: every process mapping the file
  bool retprobe = false;
};

// One link for every site; fails as a whole if one site cannot be placed.
absl::StatusOr<ScopedFd> AttachUprobeMulti(int program_fd, const UprobeMultiSites& sites);

// An attach's errno in words, the kernel's own ENOTSUPP (524) too, which
// strerror calls "Unknown error 524".
std::string UprobeErrnoText(int error);

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_UPROBE_MULTI_H_
