#include "daemon/louped/startup_checks.h"

#include <fmt/format.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "daemon/base/proc_root.h"

namespace loupe::louped {
namespace {

// Capability numbers newer than some libc headers.
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

struct Capability {
  int number;
  const char* name;
  bool fatal;
  const char* disables;
};

// The set deploy/systemd/louped.service grants, and why (docs/operations.md).
constexpr Capability kCapabilities[] = {
    {kCapBpf, "CAP_BPF", true, "BPF programs and maps cannot be created: nothing can be traced"},
    {kCapPerfmon, "CAP_PERFMON", true,
     "tracepoints, uprobes and CPU sampling cannot be attached: nothing can be traced"},
    {CAP_SYS_PTRACE, "CAP_SYS_PTRACE", false,
     "other users' processes cannot be inspected (/proc/<pid>/maps, exe, root): only louped's "
     "own user's processes can be traced"},
    {CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH", false,
     "binaries and debug files the daemon's user may not read cannot be probed or symbolized"},
    {CAP_SYSLOG, "CAP_SYSLOG", false,
     "kernel addresses in /proc/kallsyms read as 0 under kptr_restrict=1: kernel frames stay "
     "unnamed"},
};

// The uprobe PMU is gated on CAP_SYS_ADMIN by some kernels and on
// CAP_PERFMON by others: ask the kernel. A disabled event at offset 0 of
// our own binary registers nothing.
bool UprobesAllowed() {
  std::ifstream type_file("/sys/bus/event_source/devices/uprobe/type");
  uint32_t type = 0;
  if (!(type_file >> type)) return false;
  static const char kSelf[] = "/proc/self/exe";
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = type;
  attr.disabled = 1;
  attr.config1 = reinterpret_cast<uint64_t>(kSelf);
  const int fd = static_cast<int>(
      syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd >= 0) {
    close(fd);
    return true;
  }
  return errno != EACCES && errno != EPERM;
}

uint64_t EffectiveCapabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return 0;
  return static_cast<uint64_t>(data[0].effective) | (static_cast<uint64_t>(data[1].effective) << 32);
}

int ReadNumber(const char* path, int fallback) {
  std::ifstream in(path);
  int value = fallback;
  in >> value;
  return in ? value : fallback;
}

}  // namespace

std::vector<Finding> RunStartupChecks() {
  std::vector<Finding> findings;
  const uint64_t effective = EffectiveCapabilities();
  auto has = [effective](int capability) { return (effective >> capability) & 1; };
  for (const Capability& capability : kCapabilities) {
    if (has(capability.number)) continue;
    findings.push_back({capability.fatal, fmt::format("missing capability {}: {}", capability.name,
                                                      capability.disables)});
  }

  if (has(kCapPerfmon) && !UprobesAllowed()) {
    findings.push_back({false, fmt::format("missing capability CAP_SYS_ADMIN: this kernel opens "
                                           "its uprobe PMU only with it, so uprobes, USDT and the "
                                           "shim's probes cannot be attached (sched and CPU "
                                           "sampling work)")});
  }

  if (HostPidsUnreachable()) {
    findings.push_back({true,
                        "louped runs in a PID namespace of its own but proc_root is /proc, which "
                        "shows only that namespace: BPF reports host pids, so targets could not be "
                        "found (mount the host's /proc, e.g. at /host/proc, and set proc_root, or "
                        "run in the host's PID namespace)"});
  }
  std::error_code error;
  if (!PidsAreLocal() && !std::filesystem::exists(ProcPath(1, "/status"), error)) {
    findings.push_back({true, fmt::format("proc_root {} holds no procfs", ProcRoot())});
  }
  if (!std::filesystem::exists("/sys/kernel/btf/vmlinux", error)) {
    findings.push_back({true,
                        "no kernel BTF at /sys/kernel/btf/vmlinux: the CO-RE BPF programs cannot "
                        "be loaded (a kernel built with CONFIG_DEBUG_INFO_BTF is needed)"});
  }
  if (!std::filesystem::exists("/sys/kernel/tracing/events", error)) {
    const bool mounted =
        ::mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0 &&
        std::filesystem::exists("/sys/kernel/tracing/events", error);
    if (!mounted) {
      findings.push_back({false,
                          "tracefs is not mounted at /sys/kernel/tracing and could not be: louped "
                          "does not need it (BTF and raw tracepoints, the uprobe PMU), but bpftrace "
                          "and perf, used alongside, do"});
    }
  }
  const int paranoid = ReadNumber("/proc/sys/kernel/perf_event_paranoid", 2);
  if (!has(kCapPerfmon) && paranoid > -1) {
    findings.push_back({false, fmt::format("perf_event_paranoid={} without CAP_PERFMON: CPU "
                                           "sampling of all CPUs and kernel stacks are refused",
                                           paranoid)});
  }
  const int kptr_restrict = ReadNumber("/proc/sys/kernel/kptr_restrict", 0);
  if (kptr_restrict >= 2) {
    findings.push_back({false,
                        "kptr_restrict=2 hides kernel addresses from everyone: kernel frames stay "
                        "unnamed (set kernel.kptr_restrict=1 and grant CAP_SYSLOG)"});
  }
  return findings;
}

}  // namespace loupe::louped
