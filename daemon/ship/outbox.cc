#include "daemon/ship/outbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"
#include "daemon/format/segment_files.h"

namespace loupe::ship {
namespace {

constexpr char kShippedFolder[] = ".shipped";

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string Name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

FileId IdOf(const struct stat& st) {
  return {st.st_dev, st.st_ino, static_cast<uint64_t>(st.st_size)};
}

// A segment the shipper may take: a regular file (not a symlink, device or
// FIFO) with one link (not a hard link to a file elsewhere).
bool Shippable(const struct stat& st) { return S_ISREG(st.st_mode) && st.st_nlink == 1; }

// `directory`'s `.shipped/`, made if `create`: a directory (not a symlink)
// that louped owns, mode 0700 (made so if it is louped's and looser).
absl::StatusOr<ScopedFd> OpenShippedFolder(const std::string& directory, bool create) {
  ScopedFd parent(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!parent.valid()) return ErrnoStatus("open", directory);
  const std::string where = fmt::format("{}/{}", directory, kShippedFolder);
  if (create && ::mkdirat(parent.get(), kShippedFolder, 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus("create", where);
  }
  ScopedFd fd(
      ::openat(parent.get(), kShippedFolder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return absl::FailedPreconditionError(fmt::format(
          "{} is a symlink or not a directory: louped keeps its marks of shipped segments only "
          "in a directory of its own there; remove it",
          where));
    }
    return ErrnoStatus("open", where);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus("stat", where);
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(fmt::format(
        "{} belongs to uid {}, not to louped (uid {}): someone else made it, and its marks would "
        "make unshipped segments look shipped; remove it",
        where, st.st_uid, geteuid()));
  }
  if ((st.st_mode & 07777) != 0700 && fchmod(fd.get(), 0700) != 0) {
    return ErrnoStatus("chmod 0700", where);
  }
  return fd;
}

// The identity a mark holds ("dev ino size"); none from a mark of an
// earlier format, which then does not count (the file ships once more).
std::optional<FileId> ReadMark(int shipped_folder, const std::string& name) {
  ScopedFd fd(
      ::openat(shipped_folder, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  char text[96] = {};
  const ssize_t got = ::read(fd.get(), text, sizeof text - 1);
  if (got <= 0) return std::nullopt;
  unsigned long long dev = 0, ino = 0, size = 0;
  if (sscanf(text, "%llu %llu %llu", &dev, &ino, &size) != 3) return std::nullopt;
  return FileId{static_cast<dev_t>(dev), static_cast<ino_t>(ino), size};
}

// The file at `path` now, not followed through a symlink.
std::optional<FileId> CurrentId(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !Shippable(st)) return std::nullopt;
  return IdOf(st);
}

}  // namespace

absl::Status Outbox::Prepare() const {
  if (!keep_shipped_) return absl::OkStatus();
  absl::StatusOr<ScopedFd> folder = OpenShippedFolder(directory_, /*create=*/true);
  return folder.ok() ? absl::OkStatus() : folder.status();
}

bool Outbox::ReleaseShippedCopy(const std::string& path) {
  absl::StatusOr<ScopedFd> folder = OpenShippedFolder(Parent(path), /*create=*/false);
  if (!folder.ok()) return false;
  const std::string name = Name(path);
  std::optional<FileId> marked = ReadMark(folder->get(), name);
  if (!marked || marked != CurrentId(path)) return false;
  return ::unlinkat(folder->get(), name.c_str(), 0) == 0;
}

absl::Status Outbox::RecoverInterrupted() const {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(directory_.c_str()), closedir);
  if (dir == nullptr) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(fmt::format("list {}: {}", directory_, std::strerror(errno)));
  }
  const int fd = dirfd(dir.get());
  while (const dirent* entry = readdir(dir.get())) {
    const std::string name = entry->d_name;
    std::optional<format::SegmentFileName> parsed = format::ParseSegmentFileName(name);
    struct stat st;
    if (!parsed || !parsed->active || fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !Shippable(st)) {
      continue;
    }
    std::string sealed = name;
    sealed.resize(sealed.size() - format::kActiveSuffix.size() + format::kSealedSuffix.size());
    // Never over a file already there (someone else's, put there so that
    // root would replace it): that active file is left as it is.
    if (::renameat2(fd, name.c_str(), fd, sealed.c_str(), RENAME_NOREPLACE) != 0 &&
        errno != EEXIST && errno != ENOENT) {
      return ErrnoStatus("rename interrupted segment", directory_ + "/" + name);
    }
  }
  return absl::OkStatus();
}

std::optional<QueuedSegment> Outbox::Next(OutboxTotals* totals) const {
  struct Candidate {
    std::tuple<int64_t, int64_t> mtime;
    uint64_t sequence;
    std::string path;
    FileId id;
  };
  // Per session, its lowest sequence waiting; sessions compete by that
  // segment's age so one busy session cannot starve another.
  std::map<std::string, Candidate> first_by_session;
  *totals = {};
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(directory_.c_str()), closedir);
  if (dir == nullptr) return std::nullopt;
  const int fd = dirfd(dir.get());
  std::optional<ScopedFd> marks;
  if (keep_shipped_) {
    absl::StatusOr<ScopedFd> folder = OpenShippedFolder(directory_, /*create=*/false);
    if (folder.ok()) marks = *std::move(folder);
  }
  while (const dirent* entry = readdir(dir.get())) {
    const std::string name = entry->d_name;
    std::optional<format::SegmentFileName> parsed = format::ParseSegmentFileName(name);
    if (!parsed || parsed->active) continue;
    // Not followed through a symlink, and a regular file with one link:
    // root ships nothing a member points it at elsewhere.
    struct stat st;
    if (fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !Shippable(st)) continue;
    if (marks && ReadMark(marks->get(), name) == IdOf(st)) continue;  // a kept copy
    Candidate candidate{{st.st_mtim.tv_sec, st.st_mtim.tv_nsec},
                        parsed->sequence,
                        fmt::format("{}/{}", directory_, name),
                        IdOf(st)};
    ++totals->segments;
    totals->bytes += candidate.id.size;
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
  return QueuedSegment{oldest->path, oldest->id.size, oldest->id};
}

absl::Status Outbox::Shipped(const std::string& path, const FileId& uploaded) const {
  // Only the file shipped: one put in its place since is left alone.
  const std::optional<FileId> now = CurrentId(path);
  if (!now) return absl::OkStatus();  // gone (evicted meanwhile): nothing to do
  if (*now != uploaded) {
    return absl::FailedPreconditionError(
        fmt::format("{} was replaced after it was shipped: left as it is", path));
  }
  if (!keep_shipped_) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("delete shipped", path);
    return absl::OkStatus();
  }
  absl::StatusOr<ScopedFd> folder = OpenShippedFolder(directory_, /*create=*/true);
  if (!folder.ok()) return folder.status();
  const std::string name = Name(path);
  ScopedFd fd(::openat(folder->get(), name.c_str(),
                       O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
  const std::string mark =
      fmt::format("{} {} {}\n", static_cast<unsigned long long>(uploaded.dev),
                  static_cast<unsigned long long>(uploaded.ino), uploaded.size);
  if (!fd.valid() ||
      ::write(fd.get(), mark.data(), mark.size()) != static_cast<ssize_t>(mark.size())) {
    return ErrnoStatus("mark shipped", fmt::format("{}/{}/{}", directory_, kShippedFolder, name));
  }
  return absl::OkStatus();
}

absl::Status Outbox::Reject(const std::string& path) const {
  // Never over a file already there: a set-aside segment stays.
  for (int n = 0; n < 100; ++n) {
    const std::string rejected =
        n == 0 ? path + ".rejected" : fmt::format("{}.rejected.{}", path, n);
    if (::renameat2(AT_FDCWD, path.c_str(), AT_FDCWD, rejected.c_str(), RENAME_NOREPLACE) == 0) {
      return absl::OkStatus();
    }
    if (errno != EEXIST) return ErrnoStatus("set aside", path);
  }
  return absl::AlreadyExistsError(fmt::format("set aside {}: every name is taken", path));
}

}  // namespace loupe::ship
