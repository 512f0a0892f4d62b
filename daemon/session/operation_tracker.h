// Attributes kernel events to the application's operations: follows each
// thread's shim operation scopes (which nest) in the time-ordered stream and
// stamps that thread's CPU samples and off-CPU intervals with the innermost
// operation it is bound to.
#ifndef LOUPE_DAEMON_SESSION_OPERATION_TRACKER_H_
#define LOUPE_DAEMON_SESSION_OPERATION_TRACKER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/format/record.h"

namespace loupe::session {

class OperationTracker {
 public:
  static constexpr size_t kMaxDepth = 64;  // deeper scopes are not tracked

  // Feed every event in time order; stamps samples and off-CPU intervals.
  void Observe(format::Record& record);
  size_t tracked_threads() const { return scopes_.size(); }

 private:
  void End(uint32_t tid, uint64_t operation_id);

  absl::flat_hash_map<uint32_t, std::vector<uint64_t>> scopes_;  // by tid
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_OPERATION_TRACKER_H_
