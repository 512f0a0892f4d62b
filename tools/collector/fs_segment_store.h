// The filesystem backend (the default): segments under a root folder, in
// the layout of segment_names.h, staged in <root>/.staging/ as
//   <host>@<boot-id>@<session>@<seq>@<sha256>.partial
// An upload is appended to its staging file and renamed into place only
// after its digest and header are checked and it is fsynced. The index is
// rebuilt from the folder when the store opens.
#ifndef LOUPE_TOOLS_COLLECTOR_FS_SEGMENT_STORE_H_
#define LOUPE_TOOLS_COLLECTOR_FS_SEGMENT_STORE_H_

#include <spdlog/logger.h>

#include <map>
#include <mutex>
#include <set>

#include "tools/collector/segment_store.h"

namespace loupe::collector {

struct StoreOptions {
  std::string root;
  uint64_t max_total_bytes = StoreLimits().max_total_bytes;
  uint64_t max_age_s = StoreLimits().max_age_s;
  uint64_t max_segment_bytes = StoreLimits().max_segment_bytes;
};

class FsSegmentStore final : public SegmentStore {
 public:
  static absl::StatusOr<std::unique_ptr<FsSegmentStore>> Open(StoreOptions options,
                                                              std::shared_ptr<spdlog::logger> log);

  absl::StatusOr<std::optional<v1::StoredSegment>> Find(
      const v1::UploadBegin& begin) const override;
  absl::StatusOr<std::unique_ptr<StagedUpload>> Stage(const v1::UploadBegin& begin) override;
  absl::StatusOr<v1::StoredSegment> Commit(std::unique_ptr<StagedUpload> upload) override;
  absl::StatusOr<std::vector<v1::StoredSegment>> List(
      const v1::ListSegmentsRequest& query) const override;
  absl::Status Fetch(const std::string& name, size_t piece_bytes,
                     const std::function<bool(std::string_view)>& sink) const override;
  void EnforceRetention() override;
  void SweepStaging() override;

  uint64_t total_bytes() const;

 private:
  FsSegmentStore(StoreOptions options, std::shared_ptr<spdlog::logger> log)
      : SegmentStore({.max_total_bytes = options.max_total_bytes,
                      .max_age_s = options.max_age_s,
                      .max_segment_bytes = options.max_segment_bytes}),
        root_(std::move(options.root)),
        log_(std::move(log)) {}
  absl::Status RoomToStage(uint64_t size) const;
  absl::Status Load();
  // `stored_ns`: when this collector stored it, on its own clock.
  void Index(v1::StoredSegment segment, uint64_t stored_ns);

  const std::string root_;
  std::shared_ptr<spdlog::logger> log_;
  mutable std::mutex mutex_;
  std::map<std::string, v1::StoredSegment> by_name_;
  std::map<std::string, std::string> name_by_identity_;
  // (stored_ns, name): retention order. By when this collector stored a
  // segment, not when its header says it began: a sender whose clock runs
  // behind would have its segments evicted the moment they are stored.
  std::set<std::pair<uint64_t, std::string>> by_stored_;
  uint64_t total_bytes_ = 0;
};

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_FS_SEGMENT_STORE_H_
