// Where the collector keeps sealed segments: the interface both backends
// implement, the filesystem (fs_segment_store.h, the default) and an
// S3-compatible object store (s3_segment_store.h).
//
// Every backend names a stored segment the same way (segment_names.h):
//   <host>/<YYYY-MM-DD>/<HHMMSS.nnnnnnnnn>@<session>@<seq>@<boot-id>@<sha256>.loupe
// An upload is staged, resumable after a cut, and appears under that name
// only once whole and checked (digest, and the header against the announced
// identity), so a stored segment is always whole.
#ifndef LOUPE_TOOLS_COLLECTOR_SEGMENT_STORE_H_
#define LOUPE_TOOLS_COLLECTOR_SEGMENT_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "loupe/v1/collector.pb.h"

namespace loupe::collector {

struct StoreLimits {
  uint64_t max_total_bytes = 100ull << 30;
  uint64_t max_age_s = 7 * 24 * 3600;  // 0: no age limit
  uint64_t max_segment_bytes = 1ull << 30;
};

// An upload being staged. Not thread-safe; one stream owns it.
class StagedUpload {
 public:
  virtual ~StagedUpload() = default;
  // Bytes received so far (durable or not); the next chunk starts here.
  virtual uint64_t offset() const = 0;
  virtual const v1::UploadBegin& begin() const = 0;
  // Appends bytes that start at `offset`, which must be offset().
  virtual absl::Status Append(uint64_t offset, std::string_view data) = 0;
  // Makes durable what the backend can, and returns the offset before which
  // every byte is durable: what a resumed upload would start from.
  virtual absl::StatusOr<uint64_t> Sync() = 0;
};

class SegmentStore {
 public:
  virtual ~SegmentStore() = default;

  // Checks an upload's announcement: identity characters, size, digest length.
  absl::Status ValidateBegin(const v1::UploadBegin& begin) const;
  // The stored segment this upload would be, stored already (possibly with
  // another digest), if any.
  virtual absl::StatusOr<std::optional<v1::StoredSegment>> Find(
      const v1::UploadBegin& begin) const = 0;
  // Opens (or continues) the staged upload.
  virtual absl::StatusOr<std::unique_ptr<StagedUpload>> Stage(const v1::UploadBegin& begin) = 0;
  // Checks the staged bytes (size, digest, header against the announced
  // identity) and makes them appear under the stored name. Bytes that fail
  // are discarded; an upload not yet whole stays staged.
  virtual absl::StatusOr<v1::StoredSegment> Commit(std::unique_ptr<StagedUpload> upload) = 0;

  // By host, then start time, then sequence.
  virtual absl::StatusOr<std::vector<v1::StoredSegment>> List(
      const v1::ListSegmentsRequest& query) const = 0;
  // Passes the stored segment named `name` (as List reports it) to `sink` in
  // pieces of at most `piece_bytes`, in order; stops early when `sink`
  // returns false.
  virtual absl::Status Fetch(const std::string& name, size_t piece_bytes,
                             const std::function<bool(std::string_view)>& sink) const = 0;

  // Deletes the segments stored longest ago beyond the size and age limits,
  // logging each. Both count from when a collector stored a segment, on its
  // own clock, never from the header's start: a sender whose clock runs
  // behind would otherwise see its segments deleted as they are stored.
  virtual void EnforceRetention() = 0;
  // Deletes staged uploads nobody resumed within a day.
  virtual void SweepStaging() = 0;

 protected:
  explicit SegmentStore(StoreLimits limits) : limits_(limits) {}
  static uint64_t RealtimeNs();
  const StoreLimits limits_;
};

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_SEGMENT_STORE_H_
