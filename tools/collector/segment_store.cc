#include "tools/collector/segment_store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "daemon/base/status_util.h"
#include "daemon/format/segment_reader.h"
#include "daemon/ship/sha256.h"

namespace loupe::collector {
namespace {

namespace fs = std::filesystem;

constexpr char kStagingFolder[] = ".staging";
constexpr std::string_view kStoredSuffix = ".loupe";

bool NameChars(std::string_view text, size_t max, std::string_view extra) {
  return !text.empty() && text.size() <= max && text.front() != '.' &&
         std::all_of(text.begin(), text.end(), [&](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) ||
                  extra.find(c) != std::string_view::npos;
         });
}

// "<host>/<YYYY-MM-DD>/<HHMMSS.nnnnnnnnn>@<session>@<seq>@<boot>@<sha>.loupe"
std::string StoredName(const v1::UploadBegin& begin) {
  const uint64_t ns = begin.start_realtime_ns();
  const time_t seconds = static_cast<time_t>(ns / 1'000'000'000);
  struct tm utc {};
  gmtime_r(&seconds, &utc);
  return fmt::format("{}/{:04}-{:02}-{:02}/{:02}{:02}{:02}.{:09}@{}@{:06}@{}@{}{}",
                     begin.id().host(), utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                     utc.tm_hour, utc.tm_min, utc.tm_sec, ns % 1'000'000'000,
                     begin.id().session_id(), begin.id().sequence(), begin.id().boot_id(),
                     ship::HexOf(begin.sha256()), kStoredSuffix);
}

bool ParseUint(std::string_view text, uint64_t* value) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

bool ParseHex(std::string_view hex, std::string* bytes) {
  if (hex.size() % 2 != 0) return false;
  bytes->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    unsigned value = 0;
    auto [end, error] = std::from_chars(hex.data() + i, hex.data() + i + 2, value, 16);
    if (error != std::errc() || end != hex.data() + i + 2) return false;
    bytes->push_back(static_cast<char>(value));
  }
  return true;
}

// The inverse of StoredName; nullopt for files that are not ours.
std::optional<v1::StoredSegment> ParseStoredName(const std::string& host, const std::string& day,
                                                 std::string file) {
  if (!file.ends_with(kStoredSuffix)) return std::nullopt;
  const std::string name = fmt::format("{}/{}/{}", host, day, file);
  file.resize(file.size() - kStoredSuffix.size());
  std::vector<std::string_view> parts;
  std::string_view rest = file;
  for (size_t at; (at = rest.find('@')) != std::string_view::npos; rest.remove_prefix(at + 1)) {
    parts.push_back(rest.substr(0, at));
  }
  parts.push_back(rest);
  struct tm utc {};
  uint64_t nanos = 0, sequence = 0, year = 0, month = 0, mday = 0, hms = 0;
  if (parts.size() != 5 || day.size() != 10 || parts[0].size() != 16 || parts[0][6] != '.' ||
      !ParseUint(std::string_view(day).substr(0, 4), &year) ||
      !ParseUint(std::string_view(day).substr(5, 2), &month) ||
      !ParseUint(std::string_view(day).substr(8, 2), &mday) ||
      !ParseUint(parts[0].substr(0, 6), &hms) || !ParseUint(parts[0].substr(7), &nanos) ||
      !ParseUint(parts[2], &sequence)) {
    return std::nullopt;
  }
  v1::StoredSegment segment;
  if (!ParseHex(parts[4], segment.mutable_sha256())) return std::nullopt;
  utc.tm_year = static_cast<int>(year) - 1900;
  utc.tm_mon = static_cast<int>(month) - 1;
  utc.tm_mday = static_cast<int>(mday);
  utc.tm_hour = static_cast<int>(hms / 10000);
  utc.tm_min = static_cast<int>(hms / 100 % 100);
  utc.tm_sec = static_cast<int>(hms % 100);
  segment.set_start_realtime_ns(static_cast<uint64_t>(timegm(&utc)) * 1'000'000'000 + nanos);
  segment.mutable_id()->set_host(host);
  segment.mutable_id()->set_session_id(std::string(parts[1]));
  segment.mutable_id()->set_sequence(sequence);
  segment.mutable_id()->set_boot_id(std::string(parts[3]));
  segment.set_name(name);
  return segment;
}

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

}  // namespace

std::string IdentityKey(const v1::SegmentId& id) {
  return fmt::format("{}@{}@{}@{}", id.host(), id.boot_id(), id.session_id(), id.sequence());
}

absl::Status StagedUpload::Append(uint64_t offset, std::string_view data) {
  if (offset != offset_) {
    return absl::InvalidArgumentError(
        fmt::format("chunk at byte {}, but the upload is at byte {}", offset, offset_));
  }
  if (offset_ + data.size() > begin_.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "chunk ends at byte {}, past the announced size {}", offset_ + data.size(), begin_.size()));
  }
  while (!data.empty()) {
    const ssize_t wrote = ::pwrite(fd_.get(), data.data(), data.size(), static_cast<off_t>(offset_));
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", path_);
    }
    data.remove_prefix(static_cast<size_t>(wrote));
    offset_ += static_cast<uint64_t>(wrote);
  }
  return absl::OkStatus();
}

absl::Status StagedUpload::Sync() {
  if (::fdatasync(fd_.get()) != 0) return ErrnoStatus("fsync", path_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SegmentStore>> SegmentStore::Open(
    StoreOptions options, std::shared_ptr<spdlog::logger> log) {
  std::unique_ptr<SegmentStore> store(new SegmentStore(std::move(options), std::move(log)));
  if (absl::Status made = MakeDirectories(fs::path(store->options_.root) / kStagingFolder);
      !made.ok()) {
    return made;
  }
  if (absl::Status loaded = store->Load(); !loaded.ok()) return loaded;
  store->EnforceRetention();
  store->SweepStaging();
  return store;
}

absl::Status SegmentStore::Load() {
  std::error_code error;
  for (const fs::directory_entry& host : fs::directory_iterator(options_.root, error)) {
    const std::string host_name = host.path().filename().string();
    if (host_name.starts_with('.') || !host.is_directory()) continue;
    for (const fs::directory_entry& day : fs::directory_iterator(host.path(), error)) {
      if (!day.is_directory()) continue;
      for (const fs::directory_entry& file : fs::directory_iterator(day.path(), error)) {
        std::optional<v1::StoredSegment> segment = ParseStoredName(
            host_name, day.path().filename().string(), file.path().filename().string());
        std::error_code size_error;
        if (!segment) continue;
        segment->set_size(file.file_size(size_error));
        if (!size_error) Index(*std::move(segment));
      }
    }
  }
  if (error) {
    return absl::UnavailableError(fmt::format("list {}: {}", options_.root, error.message()));
  }
  log_->info("store {}: {} segments, {} bytes", options_.root, by_name_.size(), total_bytes_);
  return absl::OkStatus();
}

void SegmentStore::Index(v1::StoredSegment segment) {
  std::lock_guard<std::mutex> lock(mutex_);
  total_bytes_ += segment.size();
  by_start_.emplace(segment.start_realtime_ns(), segment.name());
  name_by_identity_[IdentityKey(segment.id())] = segment.name();
  by_name_[segment.name()] = std::move(segment);
}

absl::Status SegmentStore::ValidateBegin(const v1::UploadBegin& begin) const {
  const v1::SegmentId& id = begin.id();
  if (!NameChars(id.host(), 253, "-_.")) {
    return absl::InvalidArgumentError(fmt::format(
        "host '{}': must be 1-253 characters of letters, digits, '-', '_', '.'", id.host()));
  }
  if (!NameChars(id.session_id(), 128, "-_.")) {
    return absl::InvalidArgumentError(fmt::format(
        "session '{}': must be 1-128 characters of letters, digits, '-', '_', '.'",
        id.session_id()));
  }
  if (!NameChars(id.boot_id(), 64, "-")) {
    return absl::InvalidArgumentError(
        fmt::format("boot id '{}': must be 1-64 characters of letters, digits, '-'", id.boot_id()));
  }
  if (begin.sha256().size() != ship::kSha256Bytes) {
    return absl::InvalidArgumentError(
        fmt::format("sha256: {} bytes, must be {}", begin.sha256().size(), ship::kSha256Bytes));
  }
  if (begin.size() == 0 || begin.size() > options_.max_segment_bytes) {
    return absl::InvalidArgumentError(fmt::format("size {}: must be 1 to {} bytes", begin.size(),
                                                  options_.max_segment_bytes));
  }
  return absl::OkStatus();
}

std::optional<v1::StoredSegment> SegmentStore::Find(const v1::SegmentId& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto name = name_by_identity_.find(IdentityKey(id));
  if (name == name_by_identity_.end()) return std::nullopt;
  return by_name_.at(name->second);
}

absl::StatusOr<std::unique_ptr<StagedUpload>> SegmentStore::Stage(const v1::UploadBegin& begin) {
  const fs::path path = fs::path(options_.root) / kStagingFolder /
                        fmt::format("{}@{}.partial", IdentityKey(begin.id()),
                                    ship::HexOf(begin.sha256()));
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
  return std::unique_ptr<StagedUpload>(
      new StagedUpload(begin, path.string(), std::move(fd), offset));
}

absl::StatusOr<v1::StoredSegment> SegmentStore::Commit(std::unique_ptr<StagedUpload> upload) {
  const v1::UploadBegin& begin = upload->begin();
  auto reject = [&](absl::Status why) {
    ::unlink(upload->path_.c_str());
    log_->warn("rejected upload {}: {}", IdentityKey(begin.id()), MessageOf(why));
    return why;
  };
  if (upload->offset() != begin.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "the upload ended at byte {} of {}; it stays staged for a resume", upload->offset(),
        begin.size()));
  }
  if (absl::Status synced = upload->Sync(); !synced.ok()) return synced;
  absl::StatusOr<std::string> digest = ship::Sha256OfFile(upload->path_);
  if (!digest.ok()) return digest.status();
  if (*digest != begin.sha256()) {
    return reject(absl::DataLossError(
        fmt::format("sha256 of the received bytes is {}, the upload announced {}",
                    ship::HexOf(*digest), ship::HexOf(begin.sha256()))));
  }
  absl::StatusOr<std::unique_ptr<format::SegmentReader>> reader =
      format::SegmentReader::Open(upload->path_);
  if (!reader.ok()) {
    return reject(absl::InvalidArgumentError(
        fmt::format("not a Loupe segment: {}", MessageOf(reader.status()))));
  }
  const v1::SegmentHeader& header = (*reader)->header();
  if (header.host() != begin.id().host() || header.boot_id() != begin.id().boot_id() ||
      header.session_id() != begin.id().session_id() ||
      header.sequence() != begin.id().sequence() ||
      header.clock().realtime_ns() != begin.start_realtime_ns()) {
    return reject(absl::InvalidArgumentError(fmt::format(
        "the segment's header says host={} boot={} session={} sequence={} start={}, the upload "
        "announced {}@{}",
        header.host(), header.boot_id(), header.session_id(), header.sequence(),
        header.clock().realtime_ns(), IdentityKey(begin.id()), begin.start_realtime_ns())));
  }

  v1::StoredSegment stored;
  *stored.mutable_id() = begin.id();
  stored.set_size(begin.size());
  stored.set_start_realtime_ns(begin.start_realtime_ns());
  stored.set_sha256(begin.sha256());
  stored.set_name(StoredName(begin));
  const fs::path final_path = fs::path(options_.root) / stored.name();
  if (absl::Status made = MakeDirectories(final_path.parent_path()); !made.ok()) return made;
  if (::rename(upload->path_.c_str(), final_path.c_str()) != 0) {
    return ErrnoStatus("store", final_path.string());
  }
  if (absl::Status synced = SyncDirectory(final_path.parent_path()); !synced.ok()) return synced;
  Index(stored);
  EnforceRetention();
  return stored;
}

std::vector<v1::StoredSegment> SegmentStore::List(const v1::ListSegmentsRequest& query) const {
  std::vector<v1::StoredSegment> found;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, segment] : by_name_) {
    const uint64_t start = segment.start_realtime_ns();
    if (!query.host().empty() && segment.id().host() != query.host()) continue;
    if (!query.session_id().empty() && segment.id().session_id() != query.session_id()) continue;
    if (start < query.since_realtime_ns()) continue;
    if (query.until_realtime_ns() != 0 && start >= query.until_realtime_ns()) continue;
    found.push_back(segment);
  }
  std::sort(found.begin(), found.end(), [](const v1::StoredSegment& a, const v1::StoredSegment& b) {
    return std::make_tuple(a.id().host(), a.start_realtime_ns(), a.id().sequence()) <
           std::make_tuple(b.id().host(), b.start_realtime_ns(), b.id().sequence());
  });
  return found;
}

absl::StatusOr<ScopedFd> SegmentStore::OpenStored(const std::string& name) const {
  {
    // Only names the index holds: a request cannot reach outside the store.
    std::lock_guard<std::mutex> lock(mutex_);
    if (!by_name_.contains(name)) {
      return absl::NotFoundError(fmt::format("no stored segment named '{}'", name));
    }
  }
  const fs::path path = fs::path(options_.root) / name;
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path.string());
  return fd;
}

void SegmentStore::EnforceRetention() {
  const uint64_t now_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                    std::chrono::system_clock::now().time_since_epoch())
                                                    .count());
  std::lock_guard<std::mutex> lock(mutex_);
  while (!by_start_.empty()) {
    const auto [start, name] = *by_start_.begin();
    const bool too_old =
        options_.max_age_s != 0 && now_ns > start && now_ns - start > options_.max_age_s * 1'000'000'000;
    if (!too_old && total_bytes_ <= options_.max_total_bytes) break;
    const v1::StoredSegment& segment = by_name_.at(name);
    std::error_code error;
    fs::remove(fs::path(options_.root) / name, error);
    if (error) {
      log_->error("retention: could not evict {}: {}", name, error.message());
      break;
    }
    log_->info("retention: evicted {} ({} bytes, {}): {}", name, segment.size(),
               too_old ? "older than the age limit" : "over the size limit",
               too_old ? fmt::format("max_age {} s", options_.max_age_s)
                       : fmt::format("store holds {} bytes of {}", total_bytes_,
                                     options_.max_total_bytes));
    total_bytes_ -= segment.size();
    name_by_identity_.erase(IdentityKey(segment.id()));
    by_name_.erase(name);
    by_start_.erase(by_start_.begin());
  }
}

void SegmentStore::SweepStaging() {
  const auto stale_before = fs::file_time_type::clock::now() - std::chrono::hours(24);
  std::error_code error;
  for (const fs::directory_entry& entry :
       fs::directory_iterator(fs::path(options_.root) / kStagingFolder, error)) {
    std::error_code stat_error;
    if (entry.last_write_time(stat_error) >= stale_before || stat_error) continue;
    log_->info("staging: deleted {} ({} bytes), not resumed for a day",
               entry.path().filename().string(), entry.file_size(stat_error));
    fs::remove(entry.path(), stat_error);
  }
}

uint64_t SegmentStore::total_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_bytes_;
}

}  // namespace loupe::collector
