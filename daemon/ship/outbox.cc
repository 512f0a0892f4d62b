#include "daemon/ship/outbox.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <tuple>
#include <vector>

#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"
#include "daemon/format/segment_files.h"

namespace loupe::ship {
namespace {

namespace fs = std::filesystem;

constexpr char kShippedFolder[] = ".shipped";

fs::path MarkerOf(const fs::path& segment) {
  return segment.parent_path() / kShippedFolder / segment.filename();
}

bool IsShippedCopy(const std::string& path) {
  std::error_code error;
  return fs::exists(MarkerOf(path), error);
}

}  // namespace

bool Outbox::ReleaseShippedCopy(const std::string& path) {
  std::error_code error;
  return fs::remove(MarkerOf(path), error);
}

absl::Status Outbox::RecoverInterrupted() const {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory_, error)) {
    const std::string name = entry.path().filename().string();
    std::optional<format::SegmentFileName> parsed = format::ParseSegmentFileName(name);
    if (!parsed || !parsed->active) continue;
    std::string sealed = entry.path().string();
    sealed.resize(sealed.size() - format::kActiveSuffix.size() + format::kSealedSuffix.size());
    if (::rename(entry.path().c_str(), sealed.c_str()) != 0) {
      return ErrnoStatus("rename interrupted segment", entry.path().string());
    }
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    return absl::UnavailableError(fmt::format("list {}: {}", directory_, error.message()));
  }
  return absl::OkStatus();
}

std::optional<QueuedSegment> Outbox::Next(OutboxTotals* totals) const {
  struct Candidate {
    fs::file_time_type mtime;
    uint64_t sequence;
    std::string path;
    uint64_t size;
  };
  // Per session, its lowest sequence waiting; sessions compete by that
  // segment's age so one busy session cannot starve another.
  std::map<std::string, Candidate> first_by_session;
  *totals = {};
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory_, error)) {
    const std::string name = entry.path().filename().string();
    std::optional<format::SegmentFileName> parsed = format::ParseSegmentFileName(name);
    std::error_code stat_error;
    if (!parsed || parsed->active || !entry.is_regular_file(stat_error)) continue;
    if (keep_shipped_ && IsShippedCopy(entry.path().string())) continue;
    Candidate candidate{entry.last_write_time(stat_error), parsed->sequence,
                        entry.path().string(), entry.file_size(stat_error)};
    if (stat_error) continue;  // deleted meanwhile
    ++totals->segments;
    totals->bytes += candidate.size;
    auto [it, inserted] = first_by_session.try_emplace(std::string(parsed->session), candidate);
    if (!inserted && candidate.sequence < it->second.sequence) it->second = std::move(candidate);
  }
  const Candidate* oldest = nullptr;
  for (const auto& [session, candidate] : first_by_session) {
    if (oldest == nullptr ||
        std::tie(candidate.mtime, candidate.path) < std::tie(oldest->mtime, oldest->path)) {
      oldest = &candidate;
    }
  }
  if (oldest == nullptr) return std::nullopt;
  return QueuedSegment{oldest->path, oldest->size};
}

absl::Status Outbox::Shipped(const std::string& path) const {
  if (!keep_shipped_) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("delete shipped", path);
    return absl::OkStatus();
  }
  const fs::path marker = MarkerOf(path);
  std::error_code error;
  fs::create_directories(marker.parent_path(), error);
  if (error) {
    return absl::UnavailableError(
        fmt::format("create {}: {}", marker.parent_path().string(), error.message()));
  }
  ScopedFd fd(::open(marker.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0640));
  if (!fd.valid()) return ErrnoStatus("mark shipped", marker.string());
  return absl::OkStatus();
}

absl::Status Outbox::Reject(const std::string& path) const {
  const std::string rejected = path + ".rejected";
  if (::rename(path.c_str(), rejected.c_str()) != 0) return ErrnoStatus("set aside", path);
  return absl::OkStatus();
}

}  // namespace loupe::ship
