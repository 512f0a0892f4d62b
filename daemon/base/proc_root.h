// Where louped finds a process by its kernel-global pid (the pid BPF
// reports). Normally /proc. A louped in a PID namespace of its own (a pod's
// sidecar) sees only that namespace in its /proc, so it is given the host's
// procfs mounted elsewhere (config key proc_root, e.g. /host/proc), and then
// every /proc path and per-process perf event goes through this.
#ifndef LOUPE_DAEMON_BASE_PROC_ROOT_H_
#define LOUPE_DAEMON_BASE_PROC_ROOT_H_

#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace loupe {

// Read once from LOUPE_PROC_ROOT (louped exports its proc_root setting there
// before starting anything) and constant afterwards.
inline const std::string& ProcRoot() {
  static const std::string root = [] {
    const char* configured = std::getenv("LOUPE_PROC_ROOT");
    return std::string(configured != nullptr && *configured != '\0' ? configured : "/proc");
  }();
  return root;
}

// True when global pids are also this process's pids (perf_event_open and
// friends take pids as the caller's namespace numbers them).
inline bool PidsAreLocal() { return ProcRoot() == "/proc"; }

// From inside, a PID namespace cannot see its parent; but only the initial
// namespace holds kthreadd, always its pid 2.
inline bool InNestedPidNamespace() {
  std::ifstream status("/proc/2/status");
  std::string key, name;
  return !(status >> key >> name) || name != "kthreadd";
}

// Global pids cannot be found: this process has a PID namespace of its own
// and no proc_root showing the host's.
inline bool HostPidsUnreachable() { return PidsAreLocal() && InNestedPidNamespace(); }

// ProcPath(1234, "/maps") -> "/proc/1234/maps" (or under proc_root).
inline std::string ProcPath(uint32_t pid, std::string_view rest = {}) {
  return fmt::format("{}/{}{}", ProcRoot(), pid, rest);
}

}  // namespace loupe

#endif  // LOUPE_DAEMON_BASE_PROC_ROOT_H_
