// A finished ReportModel as text (the answer on the first screen, then the
// whole-trace tables) and as one JSON document (docs/report-json.md).
#ifndef LOUPE_ANALYSIS_REPORT_OUTPUT_H_
#define LOUPE_ANALYSIS_REPORT_OUTPUT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/report_model.h"
#include "daemon/format/loss_tally.h"

namespace loupe::analysis {

// Whether a loss key ("source/reason") may count scheduler events missing
// from the trace or out of their place: the sched source's own; what the
// writer and shipper lost of every kind (failed writes, evicted or
// unshipped segments); and events the merge wrote late, out of time order.
// A thread's times then miss what those switches would have told.
inline bool MayHoldSwitches(std::string_view what) {
  return what.starts_with("sched/") || what.starts_with("merge/") || what.starts_with("writer/") ||
         what.starts_with("shipper/");
}

// What the trace's segments say about their own completeness.
struct TraceVerdict {
  bool complete = true;
  format::LossTally losses;  // what was lost, and what was cut
  std::vector<std::string> problems;
  // What the session learnt while tracing (the trailers' notes): an exec
  // that left a target's probes behind.
  std::vector<std::string> notes;
  uint64_t events = 0;

  // Events lost that may have been scheduler events (MayHoldSwitches).
  uint64_t SwitchesMayBeLost() const {
    uint64_t lost = 0;
    for (const auto& [what, count] : losses.lost) {
      if (MayHoldSwitches(what)) lost += count;
    }
    return lost;
  }
};

std::string FrameText(const NamedFrame& frame);
std::string ReportText(const ReportModel& model, const TraceVerdict& verdict);
std::string ReportJson(const ReportModel& model, const TraceVerdict& verdict);

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_REPORT_OUTPUT_H_
