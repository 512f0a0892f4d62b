#include "daemon/bpf/uprobe_multi.h"

#include <bpf/bpf.h>
#include <fmt/format.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace loupe::bpf {
namespace {

static_assert(BPF_LSM_CGROUP == 43, "attach type numbering differs from the kernel's");
constexpr uint32_t kReturnFlag = 1;  // BPF_F_UPROBE_MULTI_RETURN

// BPF_LINK_CREATE's attributes for this attach type, laid out as the
// kernel's union bpf_attr has them (newer than the installed header).
struct UprobeMultiAttr {
  uint32_t program_fd;
  uint32_t target_fd;
  uint32_t attach_type;
  uint32_t flags;
  uint64_t path;
  uint64_t offsets;
  uint64_t ref_ctr_offsets;
  uint64_t cookies;
  uint32_t count;
  uint32_t multi_flags;
  uint32_t pid;
};

int LinkCreate(const UprobeMultiAttr& multi) {
  union bpf_attr attr;
  static_assert(sizeof multi <= sizeof attr);
  std::memset(&attr, 0, sizeof attr);
  std::memcpy(&attr, &multi, sizeof multi);
  return static_cast<int>(syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof attr));
}

uint64_t Address(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer); }

bool ProbeSupport() {
  const bpf_insn return_zero[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0},
      {.code = BPF_JMP | BPF_EXIT},
  };
  LIBBPF_OPTS(bpf_prog_load_opts, opts,
              .expected_attach_type = static_cast<bpf_attach_type>(kUprobeMultiAttachType));
  ScopedFd program(bpf_prog_load(BPF_PROG_TYPE_KPROBE, "uprobe_multi_probe", "GPL", return_zero,
                                 2, &opts));
  if (!program.valid()) return false;
  // A kernel that knows the attach type looks the path up and refuses a
  // directory (EBADF); one that does not refuses the attach type (EINVAL).
  const uint64_t offset = 0;
  ScopedFd link(LinkCreate({.program_fd = static_cast<uint32_t>(program.get()),
                            .attach_type = kUprobeMultiAttachType,
                            .path = Address("/"),
                            .offsets = Address(&offset),
                            .count = 1}));
  return !link.valid() && errno == EBADF;
}

}  // namespace

bool UprobeMultiSupported() {
  // LOUPE_UPROBE_MULTI=0: one link per site, to compare (attach_stall.sh)
  // or to step around a kernel whose multi links misbehave.
  static const bool supported = [] {
    const char* wanted = std::getenv("LOUPE_UPROBE_MULTI");
    return (wanted == nullptr || std::string_view(wanted) != "0") && ProbeSupport();
  }();
  return supported;
}

absl::StatusOr<ScopedFd> AttachUprobeMulti(int program_fd, const UprobeMultiSites& sites) {
  if (sites.offsets.empty() || sites.offsets.size() != sites.semaphore_offsets.size() ||
      sites.offsets.size() != sites.cookies.size()) {
    return absl::InvalidArgumentError(
        fmt::format("uprobe multi-link for {}: {} offsets, {} semaphores, {} cookies", sites.path,
                    sites.offsets.size(), sites.semaphore_offsets.size(), sites.cookies.size()));
  }
  ScopedFd link(LinkCreate({.program_fd = static_cast<uint32_t>(program_fd),
                            .attach_type = kUprobeMultiAttachType,
                            .path = Address(sites.path.c_str()),
                            .offsets = Address(sites.offsets.data()),
                            .ref_ctr_offsets = Address(sites.semaphore_offsets.data()),
                            .cookies = Address(sites.cookies.data()),
                            .count = static_cast<uint32_t>(sites.offsets.size()),
                            .multi_flags = sites.retprobe ? kReturnFlag : 0,
                            .pid = sites.pid}));
  if (!link.valid()) {
    return absl::InternalError(fmt::format("uprobe multi-link, {} site(s) in {}: {}",
                                           sites.offsets.size(), sites.path,
                                           UprobeErrnoText(errno)));
  }
  return link;
}

std::string UprobeErrnoText(int error) {
  if (error == 524) return "the kernel cannot place a uprobe on this instruction (ENOTSUPP, 524)";
  return std::strerror(error);
}

}  // namespace loupe::bpf
