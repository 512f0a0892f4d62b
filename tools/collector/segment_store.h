// The collector's storage: sealed segments on the local filesystem.
//
// Layout (sorted by host, then time):
//   <root>/<host>/<YYYY-MM-DD>/<HHMMSS.nnnnnnnnn>@<session>@<seq>@<boot-id>@<sha256>.loupe
//   <root>/.staging/<host>@<boot-id>@<session>@<seq>@<sha256>.partial
// Date and time are the segment's start (its header's realtime anchor, UTC).
// An upload is appended to its staging file and renamed into place only
// after its digest and header are checked and it is fsynced, so a stored
// file is always whole. docs/operations.md describes the layout and how an
// object store would take the filesystem's place.
#ifndef LOUPE_TOOLS_COLLECTOR_SEGMENT_STORE_H_
#define LOUPE_TOOLS_COLLECTOR_SEGMENT_STORE_H_

#include <spdlog/logger.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/base/scoped_fd.h"
#include "loupe/v1/collector.pb.h"

namespace loupe::collector {

// "host@boot@session@seq": a segment's identity as one string (the
// characters of each part exclude '@').
std::string IdentityKey(const v1::SegmentId& id);

struct StoreOptions {
  std::string root;
  uint64_t max_total_bytes = 100ull << 30;
  uint64_t max_age_s = 7 * 24 * 3600;  // 0: no age limit
  uint64_t max_segment_bytes = 1ull << 30;
};

// An upload being staged. Not thread-safe; one stream owns it.
class StagedUpload {
 public:
  uint64_t offset() const { return offset_; }
  const v1::UploadBegin& begin() const { return begin_; }
  // Appends bytes that start at `offset`, which must be offset().
  absl::Status Append(uint64_t offset, std::string_view data);
  // Makes everything appended so far durable.
  absl::Status Sync();

 private:
  friend class SegmentStore;
  StagedUpload(v1::UploadBegin begin, std::string path, ScopedFd fd, uint64_t offset)
      : begin_(std::move(begin)), path_(std::move(path)), fd_(std::move(fd)), offset_(offset) {}
  v1::UploadBegin begin_;
  std::string path_;
  ScopedFd fd_;
  uint64_t offset_;
};

class SegmentStore {
 public:
  static absl::StatusOr<std::unique_ptr<SegmentStore>> Open(StoreOptions options,
                                                            std::shared_ptr<spdlog::logger> log);

  // Checks an upload's announcement: identity characters, size, digest length.
  absl::Status ValidateBegin(const v1::UploadBegin& begin) const;
  // The stored segment with this identity, if any.
  std::optional<v1::StoredSegment> Find(const v1::SegmentId& id) const;
  // Opens (or continues) the staging file of this upload.
  absl::StatusOr<std::unique_ptr<StagedUpload>> Stage(const v1::UploadBegin& begin);
  // Checks the staged file (size, digest, header against the announced
  // identity) and moves it into place. A file that fails is deleted.
  absl::StatusOr<v1::StoredSegment> Commit(std::unique_ptr<StagedUpload> upload);

  std::vector<v1::StoredSegment> List(const v1::ListSegmentsRequest& query) const;
  // The stored file named `name` (as List reports it), for reading.
  absl::StatusOr<ScopedFd> OpenStored(const std::string& name) const;

  // Evicts the oldest segments beyond the size and age limits, logging each.
  void EnforceRetention();
  // Deletes staged uploads nobody resumed within a day.
  void SweepStaging();
  uint64_t total_bytes() const;

 private:
  SegmentStore(StoreOptions options, std::shared_ptr<spdlog::logger> log)
      : options_(std::move(options)), log_(std::move(log)) {}
  absl::Status Load();
  void Index(v1::StoredSegment segment);

  StoreOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mutex_;
  std::map<std::string, v1::StoredSegment> by_name_;
  std::map<std::string, std::string> name_by_identity_;
  std::set<std::pair<uint64_t, std::string>> by_start_;  // (start, name): retention order
  uint64_t total_bytes_ = 0;
};

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_SEGMENT_STORE_H_
