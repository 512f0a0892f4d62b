// What a session lost, from every place that can lose: the BPF programs'
// counters (ring full, stack cut, target map full), the merge (late,
// malformed records) and the probe decoders (strings cut, unreadable
// records). Each cycle turns what is new since the last into Loss records
// for the trace, and the ledger keeps the totals that status shows, so the
// trace and status cannot disagree.
#ifndef LOUPE_DAEMON_SESSION_LOSS_LEDGER_H_
#define LOUPE_DAEMON_SESSION_LOSS_LEDGER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/bpf/sources.h"
#include "daemon/format/record.h"
#include "daemon/session/probe_record_decoder.h"

namespace loupe::session {

// Cumulative counts at one moment, from every place that can lose.
struct LossCounts {
  bpf::BpfCounters bpf{};
  uint64_t late = 0;
  uint64_t malformed = 0;
  // User stack walks cut at a frame that cannot be one (a cut, not a loss).
  uint64_t unwind_stopped_sched = 0;
  uint64_t unwind_stopped_cpu = 0;
  ProbeLosses probes;
};

class LossLedger {
 public:
  // What is new since the last call, as Loss payloads (zero counts left out).
  std::vector<format::Loss> Since(const LossCounts& now);
  // Every Loss written to the trace passes here, wherever it came from
  // (the writer's own, too), so the totals are what the trace says.
  void Count(const format::Loss& loss);
  // "source/reason" -> events.
  const std::map<std::string, uint64_t>& totals() const { return totals_; }

 private:
  LossCounts reported_;
  std::map<std::string, uint64_t> totals_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_LOSS_LEDGER_H_
