#include "analysis/perfetto_export.h"

#include <memory>

#include "analysis/perfetto_writer.h"
#include "analysis/stack_profile.h"

namespace loupe::analysis {

absl::Status ExportPerfetto(const std::vector<std::string>& paths, format::TraceReader& trace,
                            std::ostream& out) {
  StackProfile names;
  uint64_t monotonic = 0, realtime = 0;
  {
    absl::StatusOr<std::unique_ptr<format::TraceReader>> first = format::TraceReader::Open(paths);
    if (!first.ok()) return first.status();
    format::Record record;
    while ((*first)->Next(&record)) {
    }
    for (const format::SegmentSummary& summary : (*first)->summaries()) {
      names.AddSymbols(summary.symbols);
      if (monotonic == 0 && summary.header.has_clock()) {
        monotonic = summary.header.clock().monotonic_ns();
        realtime = summary.header.clock().realtime_ns();
      }
    }
  }
  PerfettoWriter writer(out, names);
  writer.Start(monotonic, realtime);
  format::Record record;
  while (trace.Next(&record)) writer.Add(record);
  writer.Finish();
  return absl::OkStatus();
}

}  // namespace loupe::analysis
