// Pairs each function return with its entry on the same thread (a stack per
// thread and probe, so recursion pairs correctly) and puts the call's
// latency on the return event. By the stack pointer when the records have
// it: an exception (or longjmp) leaves calls with no return, and a return
// is then its own call's, not the innermost one still open; a new entry at
// or above an open call's stack depth means that call is over. Where a C++
// exception is caught (kExceptionCaughtProbe), the calls whose frames it
// unwound end there, as returns marked `unwound`; so do the calls a longjmp
// leaves (kLongjmpProbe), at the jump.
#ifndef LOUPE_DAEMON_SESSION_UPROBE_PAIRER_H_
#define LOUPE_DAEMON_SESSION_UPROBE_PAIRER_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "daemon/format/record.h"

namespace loupe::session {

class UprobePairer {
 public:
  // Open calls kept per thread and probe; past it the oldest is dropped.
  static constexpr size_t kMaxDepth = 1024;

  // Only these probes' calls (by their names' addresses in the session's
  // probe table) are paired: an entry-only probe's calls never end, and a
  // catch must not invent ends for them. Unset: every probe's.
  void set_returning(absl::flat_hash_set<const char*> probes) { returning_ = std::move(probes); }
  // Feed every event in time order, with its user stack pointer (0
  // unknown) and its probe's values (a catch's: the bounds of the mapping
  // its stack is in); fills UprobeReturn::duration_ns.
  void Observe(format::Record& record, uint64_t user_sp, std::span<const int64_t> values = {});
  // Whether `record` is the catch of an exception or a longjmp: louped's own event,
  // which stands for the returns Observe put in unwound(), not written.
  static bool IsCatch(const format::Record& record);
  // The calls the last catch or longjmp observed left, innermost first, to be
  // written at its time on its thread.
  const std::vector<format::UprobeReturn>& unwound() const { return unwound_; }
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
  // An exception caught (or a longjmp landing) in a frame whose calls'
  // stack pointer is `sp`, on the stack mapped at [stack_start, stack_end)
  // (0, 0: not known).
  void Unwind(const format::Record& record, uint64_t sp, uint64_t stack_start, uint64_t stack_end,
              format::Unwound by);

  absl::flat_hash_map<Key, std::vector<Entry>> entries_;
  absl::flat_hash_set<const char*> returning_;
  std::vector<format::UprobeReturn> unwound_;
  std::vector<std::pair<uint64_t, format::UprobeReturn>> unwinding_;  // by entry sp
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_UPROBE_PAIRER_H_
