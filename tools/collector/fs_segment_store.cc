#include "tools/collector/fs_segment_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"
#include "daemon/format/segment_reader.h"
#include "daemon/ship/sha256.h"
#include "tools/collector/segment_names.h"

namespace loupe::collector {
namespace {

namespace fs = std::filesystem;

constexpr char kStagingFolder[] = ".staging";

absl::Status SyncDirectory(const fs::path& directory) {
  ScopedFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", directory.string());
  if (::fsync(fd.get()) != 0) return ErrnoStatus("fsync", directory.string());
  return absl::OkStatus();
}

absl::Status MakeDirectories(const fs::path& directory) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    return absl::UnavailableError(
        fmt::format("create {}: {}", directory.string(), error.message()));
  }
  return absl::OkStatus();
}

class FsStagedUpload final : public StagedUpload {
 public:
  FsStagedUpload(v1::UploadBegin begin, std::string path, ScopedFd fd, uint64_t offset)
      : begin_(std::move(begin)), path_(std::move(path)), fd_(std::move(fd)), offset_(offset) {}

  uint64_t offset() const override { return offset_; }
  const v1::UploadBegin& begin() const override { return begin_; }
  const std::string& path() const { return path_; }

  absl::Status Append(uint64_t offset, std::string_view data) override {
    if (offset != offset_) {
      return absl::InvalidArgumentError(
          fmt::format("chunk at byte {}, but the upload is at byte {}", offset, offset_));
    }
    if (offset_ + data.size() > begin_.size()) {
      return absl::InvalidArgumentError(
          fmt::format("chunk ends at byte {}, past the announced size {}", offset_ + data.size(),
                      begin_.size()));
    }
    while (!data.empty()) {
      const ssize_t wrote =
          ::pwrite(fd_.get(), data.data(), data.size(), static_cast<off_t>(offset_));
      if (wrote < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("write", path_);
      }
      data.remove_prefix(static_cast<size_t>(wrote));
      offset_ += static_cast<uint64_t>(wrote);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> Sync() override {
    if (::fdatasync(fd_.get()) != 0) return ErrnoStatus("fsync", path_);
    return offset_;
  }

 private:
  v1::UploadBegin begin_;
  std::string path_;
  ScopedFd fd_;
  uint64_t offset_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<FsSegmentStore>> FsSegmentStore::Open(
    StoreOptions options, std::shared_ptr<spdlog::logger> log) {
  std::unique_ptr<FsSegmentStore> store(new FsSegmentStore(std::move(options), std::move(log)));
  if (absl::Status made = MakeDirectories(fs::path(store->root_) / kStagingFolder); !made.ok()) {
    return made;
  }
  if (absl::Status loaded = store->Load(); !loaded.ok()) return loaded;
  store->EnforceRetention();
  store->SweepStaging();
  return store;
}

absl::Status FsSegmentStore::Load() {
  std::error_code error;
  for (const fs::directory_entry& host : fs::directory_iterator(root_, error)) {
    const std::string host_name = host.path().filename().string();
    if (host_name.starts_with('.') || !host.is_directory()) continue;
    for (const fs::directory_entry& day : fs::directory_iterator(host.path(), error)) {
      if (!day.is_directory()) continue;
      for (const fs::directory_entry& file : fs::directory_iterator(day.path(), error)) {
        std::optional<v1::StoredSegment> segment =
            ParseStoredName(fmt::format("{}/{}/{}", host_name, day.path().filename().string(),
                                        file.path().filename().string()));
        if (!segment) continue;
        // Stored when it was last written (renamed into place after).
        struct stat st;
        if (::stat(file.path().c_str(), &st) != 0) continue;
        segment->set_size(static_cast<uint64_t>(st.st_size));
        Index(*std::move(segment), static_cast<uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                                       static_cast<uint64_t>(st.st_mtim.tv_nsec));
      }
    }
  }
  if (error) return absl::UnavailableError(fmt::format("list {}: {}", root_, error.message()));
  log_->info("store {}: {} segments, {} bytes", root_, by_name_.size(), total_bytes_);
  return absl::OkStatus();
}

void FsSegmentStore::Index(v1::StoredSegment segment, uint64_t stored_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  total_bytes_ += segment.size();
  by_stored_.emplace(stored_ns, segment.name());
  name_by_identity_[IdentityKey(segment.id())] = segment.name();
  by_name_[segment.name()] = std::move(segment);
}

absl::StatusOr<std::optional<v1::StoredSegment>> FsSegmentStore::Find(
    const v1::UploadBegin& begin) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto name = name_by_identity_.find(IdentityKey(begin.id()));
  if (name == name_by_identity_.end()) return std::nullopt;
  return by_name_.at(name->second);
}

absl::StatusOr<std::unique_ptr<StagedUpload>> FsSegmentStore::Stage(
    const v1::UploadBegin& begin) {
  const fs::path path = fs::path(root_) / kStagingFolder /
                        fmt::format("{}@{}.partial", IdentityKey(begin.id()),
                                    ship::HexOf(begin.sha256()));
  std::error_code exists_error;
  if (!fs::exists(path, exists_error)) {
    if (absl::Status room = RoomToStage(begin.size()); !room.ok()) return room;
  }
  ScopedFd fd(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0640));
  if (!fd.valid()) return ErrnoStatus("open staging file", path.string());
  struct stat info {};
  if (fstat(fd.get(), &info) != 0) return ErrnoStatus("stat", path.string());
  uint64_t offset = static_cast<uint64_t>(info.st_size);
  // Bytes past the announced size cannot be this file's: start over.
  if (offset > begin.size()) {
    if (::ftruncate(fd.get(), 0) != 0) return ErrnoStatus("truncate", path.string());
    offset = 0;
  }
  return std::make_unique<FsStagedUpload>(begin, path.string(), std::move(fd), offset);
}

// Unfinished uploads stay a day for a resume and are not in the retention
// budget, so a client abandoning uploads could fill the disk: a new one is
// refused (a retry later may fit) while staged bytes plus its announced size
// would pass a tenth of the budget (at least one segment's maximum).
absl::Status FsSegmentStore::RoomToStage(uint64_t size) const {
  const uint64_t budget =
      std::max(limits_.max_total_bytes / 10, limits_.max_segment_bytes);
  uint64_t staged = 0;
  std::error_code error;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(fs::path(root_) / kStagingFolder, error)) {
    std::error_code size_error;
    const uint64_t bytes = entry.file_size(size_error);
    if (!size_error) staged += bytes;
  }
  if (staged + size > budget) {
    return absl::ResourceExhaustedError(fmt::format(
        "staging holds {} bytes of unfinished uploads; {} more would pass its budget of {} "
        "(a tenth of --max-total-size): retry once uploads finish or are swept",
        staged, size, budget));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::StoredSegment> FsSegmentStore::Commit(std::unique_ptr<StagedUpload> staged) {
  // Stage made it: this store's uploads are always FsStagedUploads.
  auto* upload = static_cast<FsStagedUpload*>(staged.get());
  const v1::UploadBegin& begin = upload->begin();
  auto reject = [&](absl::Status why) {
    ::unlink(upload->path().c_str());
    log_->warn("rejected upload {}: {}", IdentityKey(begin.id()), MessageOf(why));
    return why;
  };
  if (upload->offset() != begin.size()) {
    return absl::InvalidArgumentError(
        fmt::format("the upload ended at byte {} of {}; it stays staged for a resume",
                    upload->offset(), begin.size()));
  }
  if (absl::StatusOr<uint64_t> synced = upload->Sync(); !synced.ok()) return synced.status();
  absl::StatusOr<std::string> digest = ship::Sha256OfFile(upload->path());
  if (!digest.ok()) return digest.status();
  if (*digest != begin.sha256()) {
    return reject(absl::DataLossError(
        fmt::format("sha256 of the received bytes is {}, the upload announced {}",
                    ship::HexOf(*digest), ship::HexOf(begin.sha256()))));
  }
  absl::StatusOr<std::unique_ptr<format::SegmentReader>> reader =
      format::SegmentReader::Open(upload->path());
  if (!reader.ok()) {
    return reject(absl::InvalidArgumentError(
        fmt::format("not a Loupe segment: {}", MessageOf(reader.status()))));
  }
  if (absl::Status header = CheckHeader((*reader)->header(), begin); !header.ok()) {
    return reject(header);
  }

  v1::StoredSegment stored;
  *stored.mutable_id() = begin.id();
  stored.set_size(begin.size());
  stored.set_start_realtime_ns(begin.start_realtime_ns());
  stored.set_sha256(begin.sha256());
  stored.set_name(StoredName(begin));
  const fs::path final_path = fs::path(root_) / stored.name();
  if (absl::Status made = MakeDirectories(final_path.parent_path()); !made.ok()) return made;
  if (::rename(upload->path().c_str(), final_path.c_str()) != 0) {
    return ErrnoStatus("store", final_path.string());
  }
  if (absl::Status synced = SyncDirectory(final_path.parent_path()); !synced.ok()) return synced;
  Index(stored, RealtimeNs());
  EnforceRetention();
  return stored;
}

absl::StatusOr<std::vector<v1::StoredSegment>> FsSegmentStore::List(
    const v1::ListSegmentsRequest& query) const {
  std::vector<v1::StoredSegment> found;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, segment] : by_name_) {
    if (MatchesQuery(query, segment)) found.push_back(segment);
  }
  SortForListing(found);
  return found;
}

absl::Status FsSegmentStore::Fetch(const std::string& name, size_t piece_bytes,
                                   const std::function<bool(std::string_view)>& sink) const {
  {
    // Only names the index holds: a request cannot reach outside the store.
    std::lock_guard<std::mutex> lock(mutex_);
    if (!by_name_.contains(name)) {
      return absl::NotFoundError(fmt::format("no stored segment named '{}'", name));
    }
  }
  const fs::path path = fs::path(root_) / name;
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path.string());
  std::string buffer(piece_bytes, '\0');
  for (;;) {
    const ssize_t got = ::read(fd.get(), buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoStatus("read", path.string());
    if (got == 0 || !sink(std::string_view(buffer.data(), static_cast<size_t>(got)))) {
      return absl::OkStatus();
    }
  }
}

void FsSegmentStore::EnforceRetention() {
  const uint64_t now_ns = RealtimeNs();
  std::lock_guard<std::mutex> lock(mutex_);
  while (!by_stored_.empty()) {
    const auto [stored, name] = *by_stored_.begin();
    const bool too_old = limits_.max_age_s != 0 && now_ns > stored &&
                         now_ns - stored > limits_.max_age_s * 1'000'000'000;
    if (!too_old && total_bytes_ <= limits_.max_total_bytes) break;
    const v1::StoredSegment& segment = by_name_.at(name);
    std::error_code error;
    fs::remove(fs::path(root_) / name, error);
    if (error) {
      log_->error("retention: could not evict {}: {}", name, error.message());
      break;
    }
    log_->info("retention: evicted {} ({} bytes, {}): {}", name, segment.size(),
               too_old ? "older than the age limit" : "over the size limit",
               too_old ? fmt::format("max_age {} s", limits_.max_age_s)
                       : fmt::format("store holds {} bytes of {}", total_bytes_,
                                     limits_.max_total_bytes));
    total_bytes_ -= segment.size();
    name_by_identity_.erase(IdentityKey(segment.id()));
    by_name_.erase(name);
    by_stored_.erase(by_stored_.begin());
  }
}

void FsSegmentStore::SweepStaging() {
  const auto stale_before = fs::file_time_type::clock::now() - std::chrono::hours(24);
  std::error_code error;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(fs::path(root_) / kStagingFolder, error)) {
    std::error_code stat_error;
    if (entry.last_write_time(stat_error) >= stale_before || stat_error) continue;
    log_->info("staging: deleted {} ({} bytes), not resumed for a day",
               entry.path().filename().string(), entry.file_size(stat_error));
    fs::remove(entry.path(), stat_error);
  }
}

uint64_t FsSegmentStore::total_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_bytes_;
}

}  // namespace loupe::collector
