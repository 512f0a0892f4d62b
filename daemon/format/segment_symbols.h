// A segment's header and symbol table without decoding its events. The
// symbol table is written when the segment is sealed, after the events, so a
// reader that needs names before the events (the Perfetto export) would
// otherwise decode the whole segment twice. This walks the frames by their
// zstd headers, decompresses only the header and the frames after the last
// event block, and decodes none of the blocks.
#ifndef LOUPE_DAEMON_FORMAT_SEGMENT_SYMBOLS_H_
#define LOUPE_DAEMON_FORMAT_SEGMENT_SYMBOLS_H_

#include <string>

#include "absl/status/statusor.h"
#include "loupe/v1/trace.pb.h"

namespace loupe::format {

struct SegmentSymbols {
  v1::SegmentHeader header;
  // What SegmentReader::symbols() holds after reading the whole file: the
  // last symbol frame among the whole frames before any damage; empty for
  // a segment never sealed.
  v1::SymbolTable symbols;
};

// Fails as SegmentReader::Open does (not a segment, no readable header).
absl::StatusOr<SegmentSymbols> ReadSegmentSymbols(const std::string& path);

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_SEGMENT_SYMBOLS_H_
