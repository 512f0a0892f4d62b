// The kernel's own per-thread counters, to check traces against.
#ifndef LOUPE_TESTS_SUPPORT_PROC_COUNTERS_H_
#define LOUPE_TESTS_SUPPORT_PROC_COUNTERS_H_

#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace loupe::testing {

// voluntary + nonvoluntary context switches of thread `tid` of `pid`; 0 if gone.
inline uint64_t ContextSwitches(pid_t pid, pid_t tid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
  uint64_t total = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("voluntary_ctxt_switches:") ||
        line.starts_with("nonvoluntary_ctxt_switches:")) {
      total += std::stoull(line.substr(line.find(':') + 1));
    }
  }
  return total;
}

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_PROC_COUNTERS_H_
