// The Collector gRPC service: uploads (staged, resumable, acknowledged once
// durable), listing and fetching, each call authenticated by its token and
// allowed by the client's grants (token_auth.h): uploads only as hosts it
// may upload as, lists and fetches only of hosts it may read.
#ifndef LOUPE_TOOLS_COLLECTOR_COLLECTOR_SERVICE_H_
#define LOUPE_TOOLS_COLLECTOR_COLLECTOR_SERVICE_H_

#include <spdlog/logger.h>

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "loupe/v1/collector.grpc.pb.h"
#include "tools/collector/segment_store.h"
#include "tools/collector/token_auth.h"

namespace loupe::collector {

class CollectorService final : public v1::Collector::Service {
 public:
  // `auth` unset: calls are not authenticated (only with --no-auth).
  CollectorService(SegmentStore* store, std::optional<TokenAuth> auth,
                   std::shared_ptr<spdlog::logger> log)
      : store_(store), auth_(std::move(auth)), log_(std::move(log)) {}

  grpc::Status Upload(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::UploadResponse, v1::UploadRequest>* stream) override;
  grpc::Status ListSegments(grpc::ServerContext* context, const v1::ListSegmentsRequest* request,
                            v1::ListSegmentsResponse* response) override;
  grpc::Status FetchSegment(grpc::ServerContext* context, const v1::FetchSegmentRequest* request,
                            grpc::ServerWriter<v1::FetchSegmentChunk>* writer) override;

 private:
  // The calling client, or the status to refuse the call with.
  absl::StatusOr<const Client*> Authenticate(grpc::ServerContext* context) const;
  grpc::Status ReceiveChunks(
      grpc::ServerReaderWriter<v1::UploadResponse, v1::UploadRequest>* stream,
      std::unique_ptr<StagedUpload> staged, const std::string& client);
  // One upload per segment at a time; false when another stream has it.
  bool Claim(const std::string& key);
  void Release(const std::string& key);

  SegmentStore* store_;
  std::optional<TokenAuth> auth_;
  // Who calls when there is no authentication (--no-auth): may do anything.
  const Client anonymous_{"anonymous", HostPatterns::Any(), HostPatterns::Any()};
  std::shared_ptr<spdlog::logger> log_;
  std::mutex mutex_;
  std::set<std::string> uploading_;
};

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_COLLECTOR_SERVICE_H_
