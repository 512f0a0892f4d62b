// The object-store backend: segments as objects of an S3-compatible bucket
// (AWS S3, Ceph RGW, MinIO, Swift's s3api), keyed <prefix><stored name>
// (segment_names.h), so a listing by "<host>/<date>/" finds a host's day.
//
// The bucket is the only state: any collector serves any request, and one
// restarted needs nothing but to list. An upload is an S3 multipart upload
// on the final key, so the object appears whole on CompleteMultipartUpload
// and never before. Parts hold part_bytes each (S3 wants at least 5 MiB but
// for the last); the bytes after the last whole part are only in memory,
// so a resumed upload continues from the parts stored. After each part, the
// digest's state so far is kept beside it in
//   <prefix>.staging/<stored name>/<upload id>/<parts>
// so whichever collector finishes the upload checks the whole digest
// without reading the parts back; the header is checked before part 1.
// Small segments (one part or less) are one PUT.
#ifndef LOUPE_TOOLS_COLLECTOR_S3_SEGMENT_STORE_H_
#define LOUPE_TOOLS_COLLECTOR_S3_SEGMENT_STORE_H_

#include <spdlog/logger.h>

#include "tools/collector/s3_client.h"
#include "tools/collector/segment_store.h"

namespace loupe::collector {

inline constexpr uint64_t kMinS3PartBytes = 5 << 20;

struct S3StoreOptions {
  std::string prefix;  // "" or ending in '/'
  uint64_t part_bytes = 8 << 20;  // a multiple of 64 (the digest resumes at block boundaries)
  StoreLimits limits;
};

class S3SegmentStore final : public SegmentStore {
 public:
  // Checks that the bucket answers (and the credentials are accepted).
  static absl::StatusOr<std::unique_ptr<S3SegmentStore>> Open(
      std::unique_ptr<S3Client> client, S3StoreOptions options,
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

 private:
  friend class S3StagedUpload;
  S3SegmentStore(std::unique_ptr<S3Client> client, S3StoreOptions options,
                 std::shared_ptr<spdlog::logger> log)
      : SegmentStore(options.limits),
        client_(std::move(client)),
        options_(std::move(options)),
        log_(std::move(log)) {}

  struct Listed {
    std::string key;
    uint64_t size = 0;
    std::string last_modified;  // ISO 8601, as S3 gives it
  };
  // Every object under `prefix` (after `start_after`, if given), page by
  // page, until `more` returns false.
  absl::Status ListObjects(const std::string& prefix, const std::string& start_after,
                           const std::function<bool(const Listed&)>& more) const;
  // Stored segments among `objects`; keys outside the layout are skipped.
  std::optional<v1::StoredSegment> Parse(const Listed& object) const;
  std::string StagingFolder(const std::string& name, const std::string& upload_id) const;
  // Deletes the digest states of one upload (after it completed or was aborted).
  void DeleteStates(const std::string& name, const std::string& upload_id) const;

  std::unique_ptr<S3Client> client_;
  const S3StoreOptions options_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_S3_SEGMENT_STORE_H_
