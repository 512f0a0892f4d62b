#include "daemon/session/replay_source.h"

namespace loupe::session {

absl::StatusOr<size_t> ReplaySource::Drain() {
  if (exhausted()) return 0;
  const RingBatch& batch = batches_[next_++];
  size_t bytes = 0;
  for (const std::vector<uint8_t>& record : batch.records) {
    handler_(record);
    bytes += record.size();
  }
  counters_ = batch.counters;
  return bytes;
}

}  // namespace loupe::session
