// How the collector names a segment, in every backend: its identity key and
// its stored name, which sorts by host, then time (the segment's start, its
// header's realtime anchor, UTC):
//   <host>/<YYYY-MM-DD>/<HHMMSS.nnnnnnnnn>@<session>@<seq>@<boot-id>@<sha256>.loupe
// The name alone describes the segment, so a listing needs nothing else.
#ifndef LOUPE_TOOLS_COLLECTOR_SEGMENT_NAMES_H_
#define LOUPE_TOOLS_COLLECTOR_SEGMENT_NAMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "loupe/v1/collector.pb.h"
#include "loupe/v1/trace.pb.h"

namespace loupe::collector {

// "host@boot@session@seq": a segment's identity as one string (the
// characters of each part exclude '@').
std::string IdentityKey(const v1::SegmentId& id);

// Checks the identity's characters (they become path or key parts), the
// digest's length and the size against `max_segment_bytes`.
absl::Status ValidateUploadNames(const v1::UploadBegin& begin, uint64_t max_segment_bytes);

// "<host>/<YYYY-MM-DD>/": where a host's segments of one UTC day are.
std::string DayPrefix(std::string_view host, uint64_t realtime_ns);
// The stored name up to and including the '@' before the digest: every
// stored copy of this segment, whatever its digest, starts with it.
std::string StoredNamePrefix(const v1::UploadBegin& begin);
std::string StoredName(const v1::UploadBegin& begin);
// The inverse of StoredName (size left 0); nullopt for names not ours.
std::optional<v1::StoredSegment> ParseStoredName(std::string_view name);

// The segment's own header says what the upload announced.
absl::Status CheckHeader(const v1::SegmentHeader& header, const v1::UploadBegin& begin);

bool MatchesQuery(const v1::ListSegmentsRequest& query, const v1::StoredSegment& segment);
// Host, then start time, then sequence: the order ListSegments promises.
void SortForListing(std::vector<v1::StoredSegment>& segments);

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_SEGMENT_NAMES_H_
