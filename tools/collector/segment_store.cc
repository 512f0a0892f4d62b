#include "tools/collector/segment_store.h"

#include "tools/collector/segment_names.h"

namespace loupe::collector {

absl::Status SegmentStore::ValidateBegin(const v1::UploadBegin& begin) const {
  return ValidateUploadNames(begin, limits_.max_segment_bytes);
}

}  // namespace loupe::collector
