// A trace's segments as a Perfetto trace: what `tracectl export --format
// perfetto` runs, and what the export benchmark measures.
#ifndef LOUPE_ANALYSIS_PERFETTO_EXPORT_H_
#define LOUPE_ANALYSIS_PERFETTO_EXPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/format/trace_reader.h"

namespace loupe::analysis {

// Writes the records of `trace` (opened on `paths`, not yet read) to `out`.
// Two passes: the first, over `paths`, only for the segments' symbol tables
// (each comes after its events) and clocks; the second streams packets out.
absl::Status ExportPerfetto(const std::vector<std::string>& paths, format::TraceReader& trace,
                            std::ostream& out);

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_EXPORT_H_
