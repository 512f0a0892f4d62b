// Reads records in time order across many segment files: the segments named,
// and every segment in the directories named. A session's segments follow
// each other in time, so each session is read as a chain, one file open at a
// time, and the chains are merged by timestamp. Memory stays bounded by the
// number of sessions, not the number of files.
#ifndef LOUPE_DAEMON_FORMAT_TRACE_READER_H_
#define LOUPE_DAEMON_FORMAT_TRACE_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/format/record.h"
#include "daemon/format/segment_reader.h"
#include "loupe/v1/trace.pb.h"

namespace loupe::format {

// What is known about one file once it has been read (or failed to open).
struct SegmentSummary {
  std::string path;
  bool opened = false;
  v1::SegmentHeader header;
  bool has_trailer = false;
  v1::SegmentTrailer trailer;
  v1::SymbolTable symbols;  // known once the segment is read
  std::vector<std::string> problems;
  uint64_t records_read = 0;
  bool complete = false;
  bool finished = false;
  // Not read: the file holds the same segment as this one (CopiesReadAs).
  std::string copy_of;
};

// A segment's identity: its host's boot, its session and its place in it
// (its header's). Two hosts may be given one --session-id.
struct SegmentId {
  std::string boot_id;
  std::string session;
  uint64_t sequence = 0;
};

// Files holding the same segment (copies) are read once: a sealed one
// before an active one, then the larger, then the first named. For each of
// `paths`, the index of the file read in its place (its own when it is
// read, or when its identity is unknown: an unreadable file).
std::vector<size_t> CopiesReadAs(const std::vector<std::string>& paths,
                                 const std::vector<std::optional<SegmentId>>& ids);

// Segment files directly inside `directory` (sealed, and active ones, which
// read as incomplete), sorted by name.
absl::StatusOr<std::vector<std::string>> ListSegments(const std::string& directory);

// The segment files named by `paths`: files as they are, directories by
// their segments. Fails for a path that does not exist or a directory with
// no segments.
absl::StatusOr<std::vector<std::string>> ExpandSegmentPaths(const std::vector<std::string>& paths);

class TraceReader {
 public:
  // Fails only when a path does not exist or a directory holds no segments;
  // files that are not readable segments are reported in summaries().
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const std::vector<std::string>& paths);
  ~TraceReader();

  // The next record in time order, and the segment it came from. Views in
  // the record stay valid until the next call.
  bool Next(Record* record, const SegmentReader** source = nullptr);
  // The session of the record Next() returned: its index among the
  // sessions read, in the order they began (their first records).
  uint32_t session() const { return session_; }
  // Sessions whose every record has been returned, in the order they ran
  // out (known by the first Next() after a session's last record).
  const std::vector<uint32_t>& ended_sessions() const { return ended_sessions_; }

  // One entry per file, in the order found; complete after Next() returned false.
  const std::vector<SegmentSummary>& summaries() const { return summaries_; }

 private:
  struct Chain;
  TraceReader() = default;
  bool Advance(Chain& chain);
  void Finish(Chain& chain);

  std::vector<SegmentSummary> summaries_;
  std::vector<std::unique_ptr<Chain>> chains_;
  std::vector<Chain*> heap_;  // chains with a current record, soonest first
  Chain* to_advance_ = nullptr;
  uint32_t session_ = 0;
  std::vector<uint32_t> ended_sessions_;
};

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_TRACE_READER_H_
