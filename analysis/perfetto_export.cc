#include "analysis/perfetto_export.h"

#include "analysis/perfetto_writer.h"
#include "analysis/stack_profile.h"
#include "daemon/format/segment_symbols.h"

namespace loupe::analysis {

absl::Status ExportPerfetto(const std::vector<std::string>& paths, format::TraceReader& trace,
                            PerfettoCompression compression, std::ostream& out) {
  absl::StatusOr<std::vector<std::string>> files = format::ExpandSegmentPaths(paths);
  if (!files.ok()) return files.status();
  StackProfile names;
  uint64_t monotonic = 0, realtime = 0;
  for (const std::string& file : *files) {
    // A file that cannot be read is reported by `trace`'s summaries.
    absl::StatusOr<format::SegmentSymbols> segment = format::ReadSegmentSymbols(file);
    if (!segment.ok()) continue;
    names.AddSymbols(segment->symbols);
    if (monotonic == 0 && segment->header.has_clock()) {
      monotonic = segment->header.clock().monotonic_ns();
      realtime = segment->header.clock().realtime_ns();
    }
  }
  PerfettoWriter writer(out, compression, names);
  writer.Start(monotonic, realtime);
  format::Record record;
  while (trace.Next(&record)) writer.Add(record);
  writer.Finish();
  return absl::OkStatus();
}

}  // namespace loupe::analysis
