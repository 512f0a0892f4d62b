#include "tools/collector/s3_segment_store.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <charconv>

#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"
#include "daemon/format/segment_reader.h"
#include "daemon/ship/sha256.h"
#include "tools/collector/s3_xml.h"
#include "tools/collector/segment_names.h"
#include "tools/collector/sha256_midstate.h"

namespace loupe::collector {
namespace {

constexpr char kStagingFolder[] = ".staging/";

uint64_t ParseCount(std::string_view text) {
  uint64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// S3's timestamps ("2026-12-03T18:42:56.000Z") compare as text; this is
// `seconds_ago` in the same form, to the second.
std::string IsoTimeAgo(int64_t seconds_ago) {
  const time_t then = time(nullptr) - seconds_ago;
  struct tm utc {};
  gmtime_r(&then, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", utc.tm_year + 1900, utc.tm_mon + 1,
                     utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
}

// The header of a segment from its first bytes, checked against the upload.
absl::Status CheckHeaderBytes(std::string_view head, const v1::UploadBegin& begin) {
  ScopedFd fd(memfd_create("loupe-segment-head", MFD_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("memfd_create", "for a segment header");
  for (std::string_view rest = head; !rest.empty();) {
    const ssize_t wrote = ::write(fd.get(), rest.data(), rest.size());
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) return ErrnoStatus("write", "a segment header to memory");
    rest.remove_prefix(static_cast<size_t>(wrote));
  }
  absl::StatusOr<std::unique_ptr<format::SegmentReader>> reader =
      format::SegmentReader::Open(fmt::format("/proc/self/fd/{}", fd.get()), 64 << 10);
  if (!reader.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("not a Loupe segment: {}", MessageOf(reader.status())));
  }
  return CheckHeader((*reader)->header(), begin);
}

}  // namespace

// One multipart upload, staged part by part (see s3_segment_store.h).
class S3StagedUpload final : public StagedUpload {
 public:
  S3StagedUpload(const S3SegmentStore* store, v1::UploadBegin begin, std::string upload_id,
                 std::vector<std::string> etags, ResumableSha256 sha)
      : store_(store),
        begin_(std::move(begin)),
        name_(StoredName(begin_)),
        key_(store_->options_.prefix + name_),
        upload_id_(std::move(upload_id)),
        etags_(std::move(etags)),
        sha_(std::move(sha)) {}

  uint64_t offset() const override { return sha_.bytes() + buffer_.size(); }
  const v1::UploadBegin& begin() const override { return begin_; }
  absl::StatusOr<uint64_t> Sync() override { return sha_.bytes(); }

  absl::Status Append(uint64_t offset, std::string_view data) override {
    if (offset != this->offset()) {
      return absl::InvalidArgumentError(
          fmt::format("chunk at byte {}, but the upload is at byte {}", offset, this->offset()));
    }
    if (offset + data.size() > begin_.size()) {
      return absl::InvalidArgumentError(
          fmt::format("chunk ends at byte {}, past the announced size {}", offset + data.size(),
                      begin_.size()));
    }
    buffer_.append(data);
    while (buffer_.size() >= store_->options_.part_bytes) {
      if (absl::Status stored = StorePart(); !stored.ok()) return stored;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<v1::StoredSegment> Commit() {
    if (offset() != begin_.size()) {
      return absl::InvalidArgumentError(
          fmt::format("the upload ended at byte {} of {}; it stays staged for a resume",
                      offset(), begin_.size()));
    }
    ResumableSha256 whole = sha_;
    whole.Update(buffer_);
    if (whole.Digest() != begin_.sha256()) {
      return Discard(absl::DataLossError(
          fmt::format("sha256 of the received bytes is {}, the upload announced {}",
                      ship::HexOf(whole.Digest()), ship::HexOf(begin_.sha256()))));
    }
    const S3Client& client = *store_->client_;
    if (upload_id_.empty()) {
      // Never a part stored: the whole segment is here, and one PUT is atomic.
      if (absl::Status header = CheckHeaderBytes(buffer_, begin_); !header.ok()) {
        return Discard(header);
      }
      absl::StatusOr<S3Response> put =
          client.Call({.method = "PUT", .key = key_, .body = buffer_});
      if (!put.ok()) return put.status();
    } else {
      // A multipart upload found with no part behind it (another collector
      // created it and was cut before its first part): the buffer starts
      // the segment, and its header has not been checked yet.
      if (sha_.bytes() == 0) {
        if (absl::Status header = CheckHeaderBytes(buffer_, begin_); !header.ok()) {
          return Discard(header);
        }
      }
      if (!buffer_.empty()) {
        if (absl::Status stored = UploadPart(buffer_); !stored.ok()) return stored;
      }
      std::string parts = "<CompleteMultipartUpload>";
      for (size_t i = 0; i < etags_.size(); ++i) {
        parts += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", i + 1,
                             XmlEscape(etags_[i]));
      }
      parts += "</CompleteMultipartUpload>";
      absl::StatusOr<S3Response> completed = client.Call(
          {.method = "POST", .key = key_, .query = {{"uploadId", upload_id_}}, .body = parts});
      if (!completed.ok()) return completed.status();
      // S3 may answer 200 and still fail, with an Error as the body.
      if (!XmlText(completed->body, "Code").empty()) {
        return S3Error(fmt::format("S3 CompleteMultipartUpload {}", key_), completed->status,
                       completed->body);
      }
      store_->DeleteStates(name_, upload_id_);
    }
    v1::StoredSegment stored;
    *stored.mutable_id() = begin_.id();
    stored.set_size(begin_.size());
    stored.set_start_realtime_ns(begin_.start_realtime_ns());
    stored.set_sha256(begin_.sha256());
    stored.set_name(name_);
    return stored;
  }

 private:
  // Stores the first part_bytes of the buffer as the next part, then the
  // digest's state after it, which makes the part count for a resume.
  absl::Status StorePart() {
    const std::string_view part = std::string_view(buffer_).substr(0, store_->options_.part_bytes);
    if (sha_.bytes() == 0) {
      if (absl::Status header = CheckHeaderBytes(part, begin_); !header.ok()) return Discard(header);
    }
    const S3Client& client = *store_->client_;
    if (upload_id_.empty()) {
      absl::StatusOr<S3Response> created =
          client.Call({.method = "POST", .key = key_, .query = {{"uploads", ""}}});
      if (!created.ok()) return created.status();
      upload_id_ = XmlText(created->body, "UploadId");
      if (upload_id_.empty()) {
        return absl::UnavailableError(
            fmt::format("S3 CreateMultipartUpload {}: no UploadId in the answer", key_));
      }
    }
    if (absl::Status stored = UploadPart(part); !stored.ok()) return stored;
    sha_.Update(part);
    absl::StatusOr<S3Response> state = client.Call(
        {.method = "PUT",
         .key = store_->StagingFolder(name_, upload_id_) + std::to_string(etags_.size()),
         .body = sha_.Save()});
    if (!state.ok()) return state.status();
    buffer_.erase(0, part.size());
    store_->log_->debug("upload {}: part {} stored, bytes 0-{} durable", key_, etags_.size(),
                        sha_.bytes());
    return absl::OkStatus();
  }

  absl::Status UploadPart(std::string_view part) {
    const uint64_t number = etags_.size() + 1;
    absl::StatusOr<S3Response> uploaded = store_->client_->Call(
        {.method = "PUT",
         .key = key_,
         .query = {{"partNumber", std::to_string(number)}, {"uploadId", upload_id_}},
         .body = part});
    if (!uploaded.ok()) return uploaded.status();
    etags_.push_back(uploaded->etag);
    return absl::OkStatus();
  }

  // Drops what was staged of bytes that can never be stored.
  absl::Status Discard(absl::Status why) {
    if (!upload_id_.empty()) {
      absl::StatusOr<S3Response> aborted = store_->client_->Call(
          {.method = "DELETE", .key = key_, .query = {{"uploadId", upload_id_}}});
      if (!aborted.ok()) {
        store_->log_->warn("could not abort upload {}: {}", key_, MessageOf(aborted.status()));
      }
      store_->DeleteStates(name_, upload_id_);
    }
    store_->log_->warn("rejected upload {}: {}", IdentityKey(begin_.id()), MessageOf(why));
    return why;
  }

  const S3SegmentStore* store_;
  v1::UploadBegin begin_;
  std::string name_, key_;
  std::string upload_id_;  // empty until the first part is stored
  std::vector<std::string> etags_;  // of parts 1..n, stored
  ResumableSha256 sha_;  // of parts 1..n
  std::string buffer_;   // received after part n
};

absl::StatusOr<std::unique_ptr<S3SegmentStore>> S3SegmentStore::Open(
    std::unique_ptr<S3Client> client, S3StoreOptions options,
    std::shared_ptr<spdlog::logger> log) {
  std::unique_ptr<S3SegmentStore> store(
      new S3SegmentStore(std::move(client), std::move(options), std::move(log)));
  const S3Endpoint& endpoint = store->client_->endpoint();
  absl::StatusOr<S3Response> probe = store->client_->Call(
      {.query = {{"list-type", "2"}, {"max-keys", "1"}, {"prefix", store->options_.prefix}}});
  if (!probe.ok()) {
    return absl::Status(probe.status().code(),
                        fmt::format("bucket {} at {} (region {}): {}", endpoint.bucket,
                                    endpoint.url, endpoint.region, MessageOf(probe.status())));
  }
  store->log_->info("store s3://{}/{} at {} (region {}), parts of {} bytes", endpoint.bucket,
                    store->options_.prefix, endpoint.url, endpoint.region,
                    store->options_.part_bytes);
  return store;
}

absl::Status S3SegmentStore::ListObjects(const std::string& prefix, const std::string& start_after,
                                         const std::function<bool(const Listed&)>& more) const {
  S3Request request{.query = {{"list-type", "2"}, {"prefix", prefix}}};
  if (!start_after.empty()) request.query["start-after"] = start_after;
  for (;;) {
    absl::StatusOr<S3Response> page = client_->Call(request);
    if (!page.ok()) return page.status();
    for (std::string_view contents : XmlElements(page->body, "Contents")) {
      const Listed object{.key = XmlText(contents, "Key"),
                          .size = ParseCount(XmlText(contents, "Size")),
                          .last_modified = XmlText(contents, "LastModified")};
      if (!more(object)) return absl::OkStatus();
    }
    if (XmlText(page->body, "IsTruncated") != "true") return absl::OkStatus();
    request.query["continuation-token"] = XmlText(page->body, "NextContinuationToken");
  }
}

std::optional<v1::StoredSegment> S3SegmentStore::Parse(const Listed& object) const {
  if (!object.key.starts_with(options_.prefix)) return std::nullopt;
  std::optional<v1::StoredSegment> segment =
      ParseStoredName(std::string_view(object.key).substr(options_.prefix.size()));
  if (segment) segment->set_size(object.size);
  return segment;
}

std::string S3SegmentStore::StagingFolder(const std::string& name,
                                          const std::string& upload_id) const {
  // Upload ids are opaque; in hex they cannot add a folder level.
  return fmt::format("{}{}{}/{}/", options_.prefix, kStagingFolder, name, ship::HexOf(upload_id));
}

void S3SegmentStore::DeleteStates(const std::string& name, const std::string& upload_id) const {
  std::vector<std::string> keys;
  absl::Status listed = ListObjects(StagingFolder(name, upload_id), "", [&](const Listed& state) {
    keys.push_back(state.key);
    return true;
  });
  for (const std::string& key : keys) {
    if (absl::StatusOr<S3Response> deleted = client_->Call({.method = "DELETE", .key = key});
        !deleted.ok()) {
      listed = deleted.status();
    }
  }
  // Left over, they are swept after a day.
  if (!listed.ok()) log_->warn("staging of {}: {}", name, MessageOf(listed));
}

absl::StatusOr<std::optional<v1::StoredSegment>> S3SegmentStore::Find(
    const v1::UploadBegin& begin) const {
  std::optional<v1::StoredSegment> found;
  absl::Status listed =
      ListObjects(options_.prefix + StoredNamePrefix(begin), "", [&](const Listed& object) {
        found = Parse(object);
        return !found.has_value();
      });
  if (!listed.ok()) return listed;
  return found;
}

absl::StatusOr<std::unique_ptr<StagedUpload>> S3SegmentStore::Stage(
    const v1::UploadBegin& begin) {
  const std::string name = StoredName(begin);
  const std::string key = options_.prefix + name;
  // An upload of this segment that some collector began: continue it.
  absl::StatusOr<S3Response> uploads =
      client_->Call({.query = {{"uploads", ""}, {"prefix", key}}});
  if (!uploads.ok()) return uploads.status();
  std::string upload_id;
  for (std::string_view upload : XmlElements(uploads->body, "Upload")) {
    if (XmlText(upload, "Key") == key) {
      upload_id = XmlText(upload, "UploadId");
      break;
    }
  }
  if (upload_id.empty()) {
    return std::make_unique<S3StagedUpload>(this, begin, "", std::vector<std::string>{},
                                            ResumableSha256());
  }
  absl::StatusOr<S3Response> parts =
      client_->Call({.key = key, .query = {{"uploadId", upload_id}}});
  if (!parts.ok()) return parts.status();
  std::vector<std::string> etags;
  for (std::string_view part : XmlElements(parts->body, "Part")) {
    // Parts 1..n in order; a gap ends what can be resumed.
    if (ParseCount(XmlText(part, "PartNumber")) != etags.size() + 1) break;
    etags.push_back(XmlText(part, "ETag"));
  }
  // The digest's state after the most parts that are all stored.
  std::vector<uint64_t> saved;
  absl::Status listed =
      ListObjects(StagingFolder(name, upload_id), "", [&](const Listed& state) {
        saved.push_back(ParseCount(state.key.substr(state.key.rfind('/') + 1)));
        return true;
      });
  if (!listed.ok()) return listed;
  std::sort(saved.rbegin(), saved.rend());
  for (uint64_t count : saved) {
    if (count == 0 || count > etags.size()) continue;
    absl::StatusOr<S3Response> state =
        client_->Call({.key = StagingFolder(name, upload_id) + std::to_string(count)});
    if (!state.ok()) return state.status();
    if (std::optional<ResumableSha256> sha = ResumableSha256::Restore(state->body)) {
      etags.resize(count);
      return std::make_unique<S3StagedUpload>(this, begin, upload_id, std::move(etags),
                                              *std::move(sha));
    }
  }
  // Parts without a digest state cannot be checked: start over in this upload.
  return std::make_unique<S3StagedUpload>(this, begin, upload_id, std::vector<std::string>{},
                                          ResumableSha256());
}

absl::StatusOr<v1::StoredSegment> S3SegmentStore::Commit(std::unique_ptr<StagedUpload> upload) {
  // Stage made it: this store's uploads are always S3StagedUploads.
  return static_cast<S3StagedUpload*>(upload.get())->Commit();
}

absl::StatusOr<std::vector<v1::StoredSegment>> S3SegmentStore::List(
    const v1::ListSegmentsRequest& query) const {
  std::vector<v1::StoredSegment> found;
  std::string prefix = options_.prefix, start_after;
  if (!query.host().empty()) {
    prefix += query.host() + "/";
    // A host's keys sort by start time: begin at the first day asked for.
    if (query.since_realtime_ns() != 0) {
      start_after = options_.prefix + DayPrefix(query.host(), query.since_realtime_ns());
    }
  }
  absl::Status listed = ListObjects(prefix, start_after, [&](const Listed& object) {
    std::optional<v1::StoredSegment> segment = Parse(object);
    if (!segment) return true;
    if (!query.host().empty() && query.until_realtime_ns() != 0 &&
        segment->start_realtime_ns() >= query.until_realtime_ns()) {
      return false;  // every later key of this host starts later still
    }
    if (MatchesQuery(query, *segment)) found.push_back(*std::move(segment));
    return true;
  });
  if (!listed.ok()) return listed;
  SortForListing(found);
  return found;
}

absl::Status S3SegmentStore::Fetch(const std::string& name, size_t piece_bytes,
                                   const std::function<bool(std::string_view)>& sink) const {
  // Only names of stored segments: a request cannot reach staging or
  // anything else in the bucket.
  if (!ParseStoredName(name)) {
    return absl::NotFoundError(fmt::format("no stored segment named '{}'", name));
  }
  std::string piece;
  bool more = true;
  absl::Status got = client_->Get(options_.prefix + name, [&](std::string_view data) {
    piece.append(data);
    if (piece.size() >= piece_bytes) {
      more = sink(std::string_view(piece).substr(0, piece_bytes));
      piece.erase(0, piece_bytes);
    }
    return more;
  });
  if (got.code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(fmt::format("no stored segment named '{}'", name));
  }
  if (!got.ok()) return got;
  if (more && !piece.empty()) sink(piece);
  return absl::OkStatus();
}

void S3SegmentStore::EnforceRetention() {
  // Each segment with when it was stored: its LastModified.
  struct Stored {
    std::string stored_at;
    v1::StoredSegment segment;
  };
  std::vector<Stored> segments;
  uint64_t total = 0;
  absl::Status listed = ListObjects(options_.prefix, "", [&](const Listed& object) {
    if (std::optional<v1::StoredSegment> segment = Parse(object)) {
      total += segment->size();
      segments.push_back({object.last_modified, *std::move(segment)});
    }
    return true;
  });
  if (!listed.ok()) {
    log_->error("retention: {}", MessageOf(listed));
    return;
  }
  // Stored in the same second: the earlier start first. A listing without
  // a time (none should lack one) counts as stored last, never as old.
  std::sort(segments.begin(), segments.end(), [](const Stored& a, const Stored& b) {
    if (a.stored_at.empty() != b.stored_at.empty()) return b.stored_at.empty();
    if (a.stored_at != b.stored_at) return a.stored_at < b.stored_at;
    return a.segment.start_realtime_ns() < b.segment.start_realtime_ns();
  });
  const std::string too_old_before =
      limits_.max_age_s != 0 ? IsoTimeAgo(static_cast<int64_t>(limits_.max_age_s)) : "";
  for (const auto& [stored_at, segment] : segments) {
    const bool too_old = !stored_at.empty() && stored_at < too_old_before;
    if (!too_old && total <= limits_.max_total_bytes) break;
    // Another collector may delete it at the same time: S3 deletes are
    // idempotent, so both succeed.
    absl::StatusOr<S3Response> deleted =
        client_->Call({.method = "DELETE", .key = options_.prefix + segment.name()});
    if (!deleted.ok()) {
      log_->error("retention: could not evict {}: {}", segment.name(),
                  MessageOf(deleted.status()));
      return;
    }
    log_->info("retention: evicted {} ({} bytes, {}): {}", segment.name(), segment.size(),
               too_old ? "older than the age limit" : "over the size limit",
               too_old ? fmt::format("max_age {} s", limits_.max_age_s)
                       : fmt::format("store holds {} bytes of {}", total, limits_.max_total_bytes));
    total -= segment.size();
  }
}

void S3SegmentStore::SweepStaging() {
  const std::string stale_before = IsoTimeAgo(24 * 3600);
  S3Request request{.query = {{"uploads", ""}, {"prefix", options_.prefix}}};
  for (;;) {
    absl::StatusOr<S3Response> page = client_->Call(request);
    if (!page.ok()) {
      log_->warn("staging sweep: {}", MessageOf(page.status()));
      return;
    }
    for (std::string_view upload : XmlElements(page->body, "Upload")) {
      const std::string key = XmlText(upload, "Key"), id = XmlText(upload, "UploadId");
      if (XmlText(upload, "Initiated") >= stale_before || !key.starts_with(options_.prefix)) {
        continue;
      }
      absl::StatusOr<S3Response> aborted =
          client_->Call({.method = "DELETE", .key = key, .query = {{"uploadId", id}}});
      if (!aborted.ok()) {
        log_->warn("staging sweep: {}", MessageOf(aborted.status()));
        continue;
      }
      log_->info("staging: aborted the upload of {}, not resumed for a day", key);
      DeleteStates(key.substr(options_.prefix.size()), id);
    }
    if (XmlText(page->body, "IsTruncated") != "true") break;
    request.query["key-marker"] = XmlText(page->body, "NextKeyMarker");
    request.query["upload-id-marker"] = XmlText(page->body, "NextUploadIdMarker");
  }
  // Digest states whose upload is gone (completed or aborted) but which a
  // failed delete left behind.
  std::vector<std::string> stale;
  absl::Status listed =
      ListObjects(options_.prefix + kStagingFolder, "", [&](const Listed& state) {
        if (state.last_modified < stale_before) stale.push_back(state.key);
        return true;
      });
  if (!listed.ok()) log_->warn("staging sweep: {}", MessageOf(listed));
  for (const std::string& key : stale) {
    if (absl::StatusOr<S3Response> deleted = client_->Call({.method = "DELETE", .key = key});
        !deleted.ok()) {
      log_->warn("staging sweep: {}", MessageOf(deleted.status()));
    }
  }
}

}  // namespace loupe::collector
