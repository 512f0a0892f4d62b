#include "tests/support/privileged.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace loupe::testing {
namespace {

bool HasCapability(int capability) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[capability / 32].effective & (1u << (capability % 32))) != 0;
}

}  // namespace

std::string MissingPrivilege() {
  if (geteuid() != 0 && !(HasCapability(CAP_BPF) && HasCapability(CAP_PERFMON))) {
    return "needs root or CAP_BPF+CAP_PERFMON to load BPF programs";
  }
  if (!std::filesystem::exists("/sys/kernel/btf/vmlinux")) {
    return "the kernel has no BTF (/sys/kernel/btf/vmlinux), needed by CO-RE programs";
  }
  return {};
}

bool PrivilegesRequired() {
  const char* value = std::getenv("LOUPE_REQUIRE_PRIVILEGED");
  return value != nullptr && std::string(value) == "1";
}

}  // namespace loupe::testing
