// Reading traces from a loupe-collector instead of local files:
// `--collector ADDR [--host H] [--session S] [--since T] [--until T]` on
// verify, report and export. The matching segments are fetched into a
// temporary folder that lives as long as the returned object.
#ifndef LOUPE_TOOLS_TRACECTL_COLLECTOR_SOURCE_H_
#define LOUPE_TOOLS_TRACECTL_COLLECTOR_SOURCE_H_

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace loupe::tracectl {

struct CollectorQuery {
  std::string address;
  std::string host, session;
  std::string since, until;  // "15m" (that long ago) or "2026-12-02T10:00:00Z"
  std::string token_file, ca_file;
};

// Adds the options; `time_flags` false when the command has its own
// --since/--until (report), which then fill the query's.
void AddCollectorOptions(CLI::App* command, CollectorQuery& query, bool time_flags);

// A temporary folder of fetched segments, removed with this object.
struct FetchedSegments {
  ~FetchedSegments();
  std::string directory;
  size_t count = 0;
};

// The segments to read: `paths` as given, or, with --collector, the folder
// the matching segments were fetched into (kept alive by `*fetched`).
absl::StatusOr<std::vector<std::string>> ResolveSources(
    const std::vector<std::string>& paths, const CollectorQuery& query,
    std::unique_ptr<FetchedSegments>* fetched);

// "15m" -> now - 15 minutes; "2026-12-02T10:00:00Z" -> that instant. In ns
// since the epoch (UTC).
absl::StatusOr<uint64_t> ParseWallClock(const std::string& text, std::string_view flag);

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_COLLECTOR_SOURCE_H_
