// A trace's segments as a Perfetto trace: what `tracectl export --format
// perfetto` runs, and what the export benchmark measures.
#ifndef LOUPE_ANALYSIS_PERFETTO_EXPORT_H_
#define LOUPE_ANALYSIS_PERFETTO_EXPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "analysis/perfetto_stream.h"
#include "daemon/format/trace_reader.h"

namespace loupe::analysis {

// Writes the records of `trace` (opened on `paths`, not yet read) to `out`.
// The segments' symbol tables and clocks are read first, without decoding
// their events (each table comes after its events); then the records stream
// out as packets.
absl::Status ExportPerfetto(const std::vector<std::string>& paths, format::TraceReader& trace,
                            PerfettoCompression compression, std::ostream& out);

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_EXPORT_H_
