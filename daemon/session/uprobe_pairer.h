// Pairs each function return with its entry on the same thread (a stack per
// thread and probe, so recursion pairs correctly) and puts the call's
// latency on the return event. By the stack pointer when the records have
// it: an exception (or longjmp) leaves calls with no return, and a return
// is then its own call's, not the innermost one still open; a new entry at
// or above an open call's stack depth means that call is over.
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

  // Feed every event in time order, with its user stack pointer (0
  // unknown); fills UprobeReturn::duration_ns.
  void Observe(format::Record& record, uint64_t user_sp);
  size_t open_calls() const;

 private:
  // Probe names are views into the session's probe table: one address each.
  using Key = std::pair<uint32_t, const char*>;

  struct Entry {
    uint64_t time_ns, sp;
  };
  void Enter(const format::Record& record, std::string_view probe, uint64_t sp);
  // A return: its latency from its own entry.
  void Pair(const format::Record& record, format::UprobeReturn& ret, uint64_t sp);

  absl::flat_hash_map<Key, std::vector<Entry>> entries_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_UPROBE_PAIRER_H_
