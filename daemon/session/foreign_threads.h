// Names the threads of untraced processes that appear in switches (they
// held a CPU a target waited for) or wake a target, so a reader can say who
// they were. Each
// such thread is described once per segment, before its first switch there,
// and again when its name changes; segments read alone.
#ifndef LOUPE_DAEMON_SESSION_FOREIGN_THREADS_H_
#define LOUPE_DAEMON_SESSION_FOREIGN_THREADS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/session/owned_event.h"

namespace loupe::session {

class ForeignThreads {
 public:
  using IsTarget = std::function<bool(uint32_t tgid)>;
  // A process's name by pid, "" when it is gone.
  using ReadProcessName = std::function<std::string(uint32_t pid)>;
  static constexpr size_t kMaxProcessNames = 4096;

  explicit ForeignThreads(IsTarget is_target, ReadProcessName read = ReadProcComm);

  // The thread_info events to write just before `event` (a switch or a
  // wakeup).
  std::vector<OwnedEvent> Describe(const OwnedEvent& event);
  // A new segment starts: it knows no thread yet. Returns the descriptions
  // of the last switch's or wakeup's foreign sides, for the preamble: that
  // event may be the one that lands first in the new segment.
  std::vector<OwnedEvent> StartSegment();

  // /proc/<pid>/comm under the proc root.
  static std::string ReadProcComm(uint32_t pid);

 private:
  struct Side {
    uint64_t time_ns = 0;
    uint32_t cpu = 0;  // that of the switch or wakeup it describes
    uint32_t tid = 0;
    uint32_t tgid = 0;
    TaskComm comm;
  };
  OwnedEvent Info(const Side& side);
  const std::string& ProcessName(uint32_t tgid);

  IsTarget is_target_;
  ReadProcessName read_process_name_;
  absl::flat_hash_map<uint32_t, TaskComm> described_;  // tid -> name, this segment
  absl::flat_hash_map<uint32_t, std::string> process_names_;  // by tgid, bounded
  std::vector<Side> last_;  // the foreign sides of the last switch or wakeup
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_FOREIGN_THREADS_H_
