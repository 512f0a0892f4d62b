#include "tools/collector/collector_service.h"

#include <fmt/format.h>

#include "daemon/base/status_util.h"
#include "daemon/base/utf8.h"
#include "daemon/ship/sha256.h"
#include "tools/collector/segment_names.h"

namespace loupe::collector {
namespace {

// Staged bytes are made durable (and acknowledged) at least this often, so
// an interrupted upload resends at most this much.
constexpr uint64_t kSyncEveryBytes = 4 << 20;
constexpr size_t kMaxChunkBytes = 1 << 20;
// Longer than any host or stored name can be (segment_names.cc): refused
// before a pattern is matched against them or they are quoted in a refusal.
constexpr size_t kMaxHostBytes = 253;
constexpr size_t kMaxNameBytes = 1024;

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(MessageOf(status)));
}

// A refusal naming the client, the action, the host and what the client
// is granted instead, so an operator sees which tokens-file line to change.
grpc::Status Denied(const Client& client, std::string_view action, std::string_view host,
                    std::string_view grant_key, const HostPatterns& grant) {
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      fmt::format("client {} may not {} host {} (the tokens file grants it {}={})",
                                  client.name, action, Utf8Text(host), grant_key, grant.ToString()));
}

// The host of a stored segment's name: names are "<host>/<date>/<file>"
// (segment_store.h), and only names of stored segments are ever opened.
std::string_view HostOfName(std::string_view name) { return name.substr(0, name.find('/')); }

v1::UploadResponse Progress(uint64_t offset) {
  v1::UploadResponse response;
  response.mutable_progress()->set_offset(offset);
  return response;
}

}  // namespace

absl::StatusOr<const Client*> CollectorService::Authenticate(
    grpc::ServerContext* context) const {
  if (!auth_) return &anonymous_;
  const auto& metadata = context->client_metadata();
  auto found = metadata.find("authorization");
  if (found == metadata.end()) return auth_->Check(nullptr);
  const std::string value(found->second.data(), found->second.size());
  return auth_->Check(&value);
}

bool CollectorService::Claim(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return uploading_.insert(key).second;
}

void CollectorService::Release(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  uploading_.erase(key);
}

grpc::Status CollectorService::Upload(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::UploadResponse, v1::UploadRequest>* stream) {
  absl::StatusOr<const Client*> client = Authenticate(context);
  if (!client.ok()) {
    log_->warn("upload from {} refused: {}", context->peer(), MessageOf(client.status()));
    return ToGrpc(client.status());
  }
  v1::UploadRequest request;
  if (!stream->Read(&request)) return grpc::Status(grpc::StatusCode::CANCELLED, "no request");
  if (!request.has_begin()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "an upload must start with 'begin' (identity, sha256, size)");
  }
  const v1::UploadBegin& begin = request.begin();
  if (absl::Status valid = store_->ValidateBegin(begin); !valid.ok()) {
    log_->warn("upload from {} ({}) refused: {}", (*client)->name, context->peer(),
               MessageOf(valid));
    return ToGrpc(valid);
  }
  // Before anything about the segment is looked up: a client learns nothing
  // of hosts it may not upload as, and can stage nothing under their names.
  if (!(*client)->upload.Matches(begin.id().host())) {
    grpc::Status denied =
        Denied(**client, "upload as", begin.id().host(), "upload", (*client)->upload);
    log_->warn("upload from {} refused: {}", context->peer(), denied.error_message());
    return denied;
  }
  const std::string key = IdentityKey(begin.id());
  // Claimed before the store is asked whether the segment is there: a stream
  // that finished between the two would otherwise be stored again.
  if (!Claim(key)) {
    return grpc::Status(grpc::StatusCode::ABORTED,
                        fmt::format("segment {} is being uploaded by another stream", key));
  }
  struct Unclaim {
    CollectorService* service;
    const std::string& key;
    ~Unclaim() { service->Release(key); }
  } unclaim{this, key};
  absl::StatusOr<std::optional<v1::StoredSegment>> found = store_->Find(begin);
  if (!found.ok()) {
    log_->error("upload {}: {}", key, MessageOf(found.status()));
    return ToGrpc(found.status());
  }
  if (const std::optional<v1::StoredSegment>& stored = *found) {
    if (stored->sha256() != begin.sha256()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          fmt::format("segment {} is stored already with a different sha256 ({})",
                                      key, ship::HexOf(stored->sha256())));
    }
    v1::UploadResponse response;
    response.mutable_stored()->set_duplicate(true);
    response.mutable_stored()->set_location(stored->name());
    stream->Write(response);
    return grpc::Status::OK;
  }
  absl::StatusOr<std::unique_ptr<StagedUpload>> staged = store_->Stage(begin);
  if (!staged.ok()) {
    log_->error("upload {}: {}", key, MessageOf(staged.status()));
    return ToGrpc(staged.status());
  }
  if ((*staged)->offset() > 0) {
    log_->info("upload {} from {}: resuming at byte {} of {}", key, (*client)->name,
               (*staged)->offset(),
               begin.size());
  }
  if (!stream->Write(Progress((*staged)->offset()))) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
  }
  return ReceiveChunks(stream, *std::move(staged), (*client)->name);
}

grpc::Status CollectorService::ReceiveChunks(
    grpc::ServerReaderWriter<v1::UploadResponse, v1::UploadRequest>* stream,
    std::unique_ptr<StagedUpload> staged, const std::string& client) {
  const std::string key = IdentityKey(staged->begin().id());
  uint64_t synced = staged->offset();
  v1::UploadRequest request;
  while (stream->Read(&request)) {
    if (!request.has_chunk()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "only chunks may follow an upload's begin");
    }
    const v1::UploadChunk& chunk = request.chunk();
    if (chunk.data().size() > kMaxChunkBytes) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          fmt::format("chunk of {} bytes; at most {}", chunk.data().size(),
                                      kMaxChunkBytes));
    }
    if (absl::Status appended = staged->Append(chunk.offset(), chunk.data()); !appended.ok()) {
      return ToGrpc(appended);
    }
    if (chunk.last()) {
      absl::StatusOr<v1::StoredSegment> stored = store_->Commit(std::move(staged));
      if (!stored.ok()) return ToGrpc(stored.status());
      log_->info("stored {} ({} bytes) from {}", stored->name(), stored->size(), client);
      v1::UploadResponse response;
      response.mutable_stored()->set_location(stored->name());
      stream->Write(response);
      return grpc::Status::OK;
    }
    if (staged->offset() - synced >= kSyncEveryBytes) {
      absl::StatusOr<uint64_t> durable = staged->Sync();
      if (!durable.ok()) return ToGrpc(durable.status());
      if (*durable > synced) stream->Write(Progress(*durable));
      // Counted from what was asked for, so a backend that makes bytes
      // durable in larger pieces is asked again only after as many more.
      synced = staged->offset();
    }
  }
  // Cut short (client gone, or the server is shutting down): what arrived
  // stays staged and the next attempt continues after it.
  return grpc::Status(grpc::StatusCode::CANCELLED,
                      fmt::format("upload {} stopped at byte {} of {}; staged for a resume", key,
                                  staged->offset(), staged->begin().size()));
}

grpc::Status CollectorService::ListSegments(grpc::ServerContext* context,
                                            const v1::ListSegmentsRequest* request,
                                            v1::ListSegmentsResponse* response) {
  absl::StatusOr<const Client*> client = Authenticate(context);
  if (!client.ok()) return ToGrpc(client.status());
  const Client& reader = **client;
  if (request->host().size() > kMaxHostBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("host of {} bytes: a host name has at most {}",
                                    request->host().size(), kMaxHostBytes));
  }
  if (!request->host().empty() && !reader.read.Matches(request->host())) {
    return Denied(reader, "list segments of", request->host(), "read", reader.read);
  }
  if (reader.read.empty()) {
    return grpc::Status(
        grpc::StatusCode::PERMISSION_DENIED,
        fmt::format("client {} may not list segments: the tokens file grants it read=(none)",
                    reader.name));
  }
  // Every host, asked by a client that may read some: those it may read.
  absl::StatusOr<std::vector<v1::StoredSegment>> listed = store_->List(*request);
  if (!listed.ok()) {
    log_->error("list: {}", MessageOf(listed.status()));
    return ToGrpc(listed.status());
  }
  for (v1::StoredSegment& segment : *listed) {
    if (reader.read.Matches(segment.id().host())) *response->add_segments() = std::move(segment);
  }
  return grpc::Status::OK;
}

grpc::Status CollectorService::FetchSegment(grpc::ServerContext* context,
                                            const v1::FetchSegmentRequest* request,
                                            grpc::ServerWriter<v1::FetchSegmentChunk>* writer) {
  absl::StatusOr<const Client*> client = Authenticate(context);
  if (!client.ok()) return ToGrpc(client.status());
  if (request->name().size() > kMaxNameBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("name of {} bytes: a stored segment's name has at most {}",
                                    request->name().size(), kMaxNameBytes));
  }
  // Checked before the name is looked up, so a refused client cannot tell
  // which names exist.
  if (const std::string_view host = HostOfName(request->name()); !(*client)->read.Matches(host)) {
    return Denied(**client, "fetch segments of", host, "read", (*client)->read);
  }
  v1::FetchSegmentChunk chunk;
  bool reader_gone = false;
  absl::Status fetched =
      store_->Fetch(request->name(), kMaxChunkBytes, [&](std::string_view piece) {
        chunk.set_data(piece.data(), piece.size());
        reader_gone = !writer->Write(chunk);
        return !reader_gone;
      });
  if (!fetched.ok()) return ToGrpc(fetched);
  if (reader_gone) return grpc::Status(grpc::StatusCode::CANCELLED, "reader went away");
  return grpc::Status::OK;
}

}  // namespace loupe::collector
