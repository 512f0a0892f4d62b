// What /proc says about processes and threads: identity (pid + start time,
// so a reused pid is not mistaken for the target), names, uid, namespace
// ids, and kernel threads. Paths are relative to a proc root so tests and
// other mount namespaces can point elsewhere.
#ifndef LOUPE_DAEMON_SESSION_PROC_H_
#define LOUPE_DAEMON_SESSION_PROC_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace loupe::session {

struct ThreadIdentity {
  uint32_t tid = 0;     // kernel-global
  uint32_t ns_tid = 0;  // in the thread's own (innermost) PID namespace
  std::string name;
};

struct ProcessIdentity {
  uint32_t pid = 0;  // kernel-global
  uint32_t ns_pid = 0;
  uint32_t ppid = 0;
  uint32_t uid = 0;  // real
  // Real, effective, saved and filesystem uids all equal, and
  // /proc/<pid>/mem owned by `uid` (the kernel gives an undumpable process's
  // files to root): it runs with its user's rights only, not a setuid
  // program's.
  bool plain_user = false;
  uint64_t start_time = 0;  // clock ticks after boot (stat field 22)
  bool kernel_thread = false;
  // Its thread group's leader: another number when `pid` names a thread
  // that is not the process's main one (/proc lists those too).
  uint32_t tgid = 0;
  char state = '?';  // stat's state: 'Z' a zombie, 'X' dead
  std::string name;
  std::string exe;
  std::map<uint32_t, ThreadIdentity> threads;
};

// What ptrace would allow a caller with `caller_uid`: root any process, a
// user its own processes that run with its rights only.
inline bool CallerMayTrace(uint32_t caller_uid, const ProcessIdentity& process) {
  return caller_uid == 0 || (process.uid == caller_uid && process.plain_user);
}

// Reads /proc/<pid> (and its tasks). NotFound when there is no such process.
absl::StatusOr<ProcessIdentity> ReadProcess(uint32_t pid);
// Only the start time: to tell whether `pid` is still the same process.
absl::StatusOr<uint64_t> ReadStartTime(uint32_t pid);
absl::StatusOr<ThreadIdentity> ReadThread(uint32_t pid, uint32_t tid);

// Every living descendant of `pid` (children, their children, ...), by
// kernel-global pid, parents before their children.
std::vector<uint32_t> Descendants(uint32_t pid);

// The kernel-global pid of the process that `caller_pid` sees as `pid` in
// its own PID namespace (a sidecar names its pod's pids).
absl::StatusOr<uint32_t> GlobalPid(uint32_t caller_pid, uint32_t pid);

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_PROC_H_
