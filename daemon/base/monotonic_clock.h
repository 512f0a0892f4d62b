// CLOCK_MONOTONIC in nanoseconds: the clock of record times
// (bpf_ktime_get_ns), for the daemon's own moments next to them.
#ifndef LOUPE_DAEMON_BASE_MONOTONIC_CLOCK_H_
#define LOUPE_DAEMON_BASE_MONOTONIC_CLOCK_H_

#include <cstdint>
#include <ctime>

namespace loupe {

inline uint64_t MonotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace loupe

#endif  // LOUPE_DAEMON_BASE_MONOTONIC_CLOCK_H_
