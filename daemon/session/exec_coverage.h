// Whether the probes placed at attach still fire in a target after it
// calls exec. The kernel keeps a uprobe on a file, so a new image of the
// same program is probed again only if the link follows the process: a
// link for every process (targets filtered in BPF) does; a link bound to
// the target's main thread does while that thread lives, which an exec
// from another thread ends. A different program's own probes were never
// placed. Either way its requests from then on are not traced, which is
// said, not left to look like a quiet service.
#ifndef LOUPE_DAEMON_SESSION_EXEC_COVERAGE_H_
#define LOUPE_DAEMON_SESSION_EXEC_COVERAGE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/probes/probe_plan.h"

namespace loupe::session {

class ExecCoverage {
 public:
  // The file a target runs now ("/proc/PID/exe"): replaceable for tests.
  using ExecutableOf = std::function<std::string(uint32_t pid)>;
  // `system_wide`: the plan's links are for every process, not per pid.
  ExecCoverage(const probes::ProbePlan& plan, bool system_wide, const std::vector<uint32_t>& pids,
               ExecutableOf executable_of);

  // `pid` called exec from thread `old_tid` (0 unknown): the warning to
  // give when its probes no longer fire, else nullopt.
  std::optional<std::string> OnExec(uint32_t pid, uint32_t old_tid);

 private:
  using FileId = std::pair<uint64_t, uint64_t>;  // st_dev, st_ino
  static std::optional<FileId> IdOf(const std::string& path);

  bool system_wide_;
  ExecutableOf executable_of_;
  // Files the plan placed sites in, for each pid (0: every process).
  absl::flat_hash_map<uint32_t, std::set<FileId>> probed_;
  // The program each target ran when last seen.
  absl::flat_hash_map<uint32_t, FileId> running_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_EXEC_COVERAGE_H_
