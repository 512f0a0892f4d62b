// What louped checks before it serves: capabilities, kernel BTF, tracefs,
// perf_event_paranoid and kptr_restrict. Each finding is one line saying
// what is missing and what that disables; a fatal one stops the daemon.
#ifndef LOUPE_DAEMON_LOUPED_STARTUP_CHECKS_H_
#define LOUPE_DAEMON_LOUPED_STARTUP_CHECKS_H_

#include <string>
#include <vector>

namespace loupe::louped {

struct Finding {
  bool fatal = false;
  std::string line;
};

std::vector<Finding> RunStartupChecks();

}  // namespace loupe::louped

#endif  // LOUPE_DAEMON_LOUPED_STARTUP_CHECKS_H_
