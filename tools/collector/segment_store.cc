#include "tools/collector/segment_store.h"

#include <fmt/format.h>

#include <ctime>

#include "tools/collector/segment_names.h"

namespace loupe::collector {
namespace {

// How far a segment's start may lie ahead of this collector's clock (hosts'
// clocks drift): a host further ahead has a wrong clock, and its segments
// would be listed (by start, and --since/--until) out of their place in time.
constexpr uint64_t kMaxFutureNs = 3600ull * 1'000'000'000;

}  // namespace

uint64_t SegmentStore::RealtimeNs() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

absl::Status SegmentStore::ValidateBegin(const v1::UploadBegin& begin) const {
  if (absl::Status names = ValidateUploadNames(begin, limits_.max_segment_bytes); !names.ok()) {
    return names;
  }
  const uint64_t now_ns = RealtimeNs();
  if (begin.start_realtime_ns() > now_ns + kMaxFutureNs) {
    return absl::InvalidArgumentError(fmt::format(
        "start time {} ns is {} s ahead of this collector's clock (at most {} s): the sending "
        "host's clock is wrong, and its segments would be listed out of their place in time",
        begin.start_realtime_ns(), (begin.start_realtime_ns() - now_ns) / 1'000'000'000,
        kMaxFutureNs / 1'000'000'000));
  }
  return absl::OkStatus();
}

}  // namespace loupe::collector
