// Pairs each function return with its entry on the same thread (a stack per
// thread and probe, so recursion pairs correctly) and puts the call's
// latency on the return event.
#ifndef LOUPE_DAEMON_SESSION_UPROBE_PAIRER_H_
#define LOUPE_DAEMON_SESSION_UPROBE_PAIRER_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/format/record.h"

namespace loupe::session {

class UprobePairer {
 public:
  static constexpr size_t kMaxDepth = 1024;  // deeper recursion is not paired

  // Feed every event in time order; fills UprobeReturn::duration_ns.
  void Observe(format::Record& record);
  size_t open_calls() const;

 private:
  // Probe names are views into the session's probe table: one address each.
  using Key = std::pair<uint32_t, const char*>;

  // A return: its latency from the innermost open entry of its probe.
  void Pair(const format::Record& record, format::UprobeReturn& ret);

  absl::flat_hash_map<Key, std::vector<uint64_t>> entries_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_UPROBE_PAIRER_H_
