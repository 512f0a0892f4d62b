#include "daemon/format/directory_budget.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>

#include "daemon/base/scoped_fd.h"
#include "daemon/format/segment_files.h"

namespace loupe::format {
namespace {

std::string FileName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Opens a regular file without following a symlink and without blocking on
// a FIFO put in its place; the reader then reads this very file through
// /proc/self/fd, whatever happens to the name meanwhile.
ScopedFd OpenRegular(const std::string& path, struct stat* st) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid() || fstat(fd.get(), st) != 0 || !S_ISREG(st->st_mode)) return ScopedFd();
  return fd;
}

std::string FdPath(const ScopedFd& fd) { return fmt::format("/proc/self/fd/{}", fd.get()); }

int64_t Ns(const timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// What the header of the open file `fd` (fstat as `st`) says.
std::optional<SegmentFileFacts> FactsOf(const ScopedFd& fd, const struct stat& st) {
  // The header is in the first frame: a small read is enough.
  absl::StatusOr<std::unique_ptr<SegmentReader>> reader = SegmentReader::Open(FdPath(fd), 4096);
  if (!reader.ok()) return std::nullopt;
  const v1::SegmentHeader& header = (*reader)->header();
  if (header.writer_id().empty()) return std::nullopt;  // an earlier format, or not a writer's
  SegmentFileFacts facts;
  facts.identity = {header.host(), header.writer_id()};
  facts.session = header.session_id();
  facts.owner = st.st_uid;
  facts.group = st.st_gid;
  facts.allocated = static_cast<uint64_t>(st.st_blocks) * 512;
  // The header's clock is the owner's word too, but a file cannot pass for
  // newer than the moment it was made or last renamed (ctime).
  const uint64_t realtime = header.clock().realtime_ns();
  facts.start_ns = std::min<int64_t>(
      realtime > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(realtime),
      Ns(st.st_ctim));
  return facts;
}

}  // namespace

int64_t DirectoryBudget::RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::optional<SegmentFileFacts> ReadSegmentFacts(const std::string& path) {
  struct stat st;
  ScopedFd fd = OpenRegular(path, &st);
  if (!fd.valid()) return std::nullopt;
  return FactsOf(fd, st);
}

std::optional<Credentials> OwnerCredentials(uid_t uid, gid_t gid,
                                            const std::optional<Credentials>& caller) {
  if (caller && caller->uid == uid) return *caller;
  if (uid == 0 || uid == geteuid()) return std::nullopt;  // louped's own rights are the owner's
  Credentials owner{.uid = uid, .gid = gid};
  std::vector<char> buffer(16 << 10);
  passwd entry;
  passwd* found = nullptr;
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return owner;  // no such user: the file's group and no others
  }
  owner.gid = entry.pw_gid;
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  if (getgrouplist(entry.pw_name, entry.pw_gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count));
    if (getgrouplist(entry.pw_name, entry.pw_gid, groups.data(), &count) < 0) count = 0;
  }
  groups.resize(static_cast<size_t>(std::max(count, 0)));
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  owner.groups = std::move(groups);
  return owner;
}

absl::Status DirectoryBudget::Join(const std::string& session, uint64_t reserve,
                                   const std::optional<Credentials>& caller) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Member& member = members_[session];
    member.uid = caller ? caller->uid : geteuid();
    member.reserved = reserve;
  }
  ScopedFsCredentials as_caller;
  if (absl::Status status = as_caller.Take(caller); !status.ok()) return status;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(directory_.c_str()), closedir);
  if (dir == nullptr) return ErrnoStatus("list", directory_);
  std::vector<std::string> names;
  while (const dirent* entry = readdir(dir.get())) {
    const std::string name = entry->d_name;
    if (std::optional<SegmentFileName> parsed = ParseSegmentFileName(name);
        parsed && !parsed->active) {
      names.push_back(name);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(names, [&](const std::string& name) {
      return segments_.contains(directory_ + "/" + name);
    });
  }
  // Headers are read outside the lock: other writers keep sealing meanwhile.
  std::vector<std::pair<std::string, Segment>> found;
  for (const std::string& name : names) {
    const std::string path = directory_ + "/" + name;
    std::optional<SegmentFileFacts> facts = ReadSegmentFacts(path);
    if (!facts || facts->identity != identity_) continue;
    found.emplace_back(path, Segment{.session = std::move(facts->session),
                                     .size = facts->allocated,
                                     .owner = facts->owner,
                                     .order = facts->start_ns});
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [path, segment] : found) {
    if (!segments_.contains(path)) AddLocked(path, std::move(segment));
  }
  return absl::OkStatus();
}

std::vector<Eviction> DirectoryBudget::Leave(const std::string& session) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = members_.find(session);
  if (it == members_.end()) return {};
  std::vector<Eviction> left = std::move(it->second.mailbox);
  members_.erase(it);
  return left;
}

void DirectoryBudget::Reserve(const std::string& session, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = members_.find(session); it != members_.end()) it->second.reserved = bytes;
}

void DirectoryBudget::AddSealed(const std::string& session, const std::string& path, uint64_t size,
                                uid_t owner, const SegmentTally& tally) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t newest = order_.empty() ? INT64_MIN : order_.rbegin()->first;
  const int64_t order = std::max(realtime_(), newest == INT64_MAX ? newest : newest + 1);
  AddLocked(path,
            {.session = session, .size = size, .owner = owner, .tally = tally, .order = order});
}

std::vector<Eviction> DirectoryBudget::TakeEvictions(const std::string& session) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = members_.find(session);
  return it == members_.end() ? std::vector<Eviction>{} : std::exchange(it->second.mailbox, {});
}

void DirectoryBudget::AddLocked(const std::string& path, Segment segment) {
  if (auto it = segments_.find(path); it != segments_.end()) {  // a name reused: the new file
    order_.erase({it->second.order, path});
    sealed_bytes_ -= it->second.size;
    segments_.erase(it);
  }
  order_.insert({segment.order, path});
  sealed_bytes_ += segment.size;
  segments_.emplace(path, std::move(segment));
}

uint64_t DirectoryBudget::UsedLocked() const {
  uint64_t used = sealed_bytes_;
  for (const auto& [session, member] : members_) used += member.reserved;
  return used;
}

uint64_t DirectoryBudget::used_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return UsedLocked();
}

std::vector<std::string> DirectoryBudget::SegmentsOf(const std::string& session) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> paths;
  for (const auto& [order, path] : order_) {
    if (segments_.at(path).session == session) paths.push_back(path);
  }
  return paths;
}

std::vector<Eviction> DirectoryBudget::Enforce(
    const std::string& session, uint64_t limit, const std::optional<Credentials>& caller,
    const std::function<bool(const std::string&)>& shipped) {
  std::vector<Eviction> to_report;
  // Without the caller's rights nothing is removed: the directory stays
  // over budget rather than louped deleting with its own.
  if (ScopedFsCredentials probe; !probe.Take(caller).ok()) return to_report;
  const bool any_owner = !caller || caller->root();
  const uid_t evictor = caller ? caller->uid : geteuid();
  std::map<uid_t, std::optional<Credentials>> owners;  // looked up once per call
  while (true) {
    std::string path;
    Segment victim;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (UsedLocked() <= limit) break;
      auto it = order_.begin();
      while (it != order_.end() && !any_owner && segments_.at(it->second).owner != caller->uid) {
        ++it;
      }
      // Nothing left this caller may remove: the directory stays over by
      // the open files (each writer evicts its own, so that is bounded).
      if (it == order_.end()) break;
      path = it->second;
      order_.erase(it);
      auto segment = segments_.find(path);
      victim = std::move(segment->second);
      segments_.erase(segment);
      sealed_bytes_ -= victim.size;
    }
    // The file is checked again just before it goes, as the caller: still a
    // regular file of this identity and session (a name can be replaced
    // since it was found), and the caller's own unless the caller is root.
    // ENOENT: the shipper deleted it once a collector had it; nothing lost.
    struct stat st;
    ScopedFd fd;
    std::optional<SegmentFileFacts> facts;
    {
      ScopedFsCredentials as_caller;
      if (!as_caller.Take(caller).ok()) continue;
      fd = OpenRegular(path, &st);
      if (fd.valid()) facts = FactsOf(fd, st);
    }
    if (!facts || facts->identity != identity_ || facts->session != victim.session ||
        (!any_owner && st.st_uid != caller->uid)) {
      continue;  // not ours (any more): left alone and no longer counted
    }
    // A copy of what was shipped: evicting it loses nothing. Asked with
    // louped's rights: the marks are louped's, in a folder only it may use.
    const bool shipped_copy = shipped && shipped(path);
    if (!shipped_copy && !victim.tally) {
      ScopedFsCredentials as_caller;  // /proc/self/fd opens the file anew, checked as usual
      if (!as_caller.Take(caller).ok()) continue;
      victim.tally = TallySegment(FdPath(fd));
    }
    {
      // Removed with the owner's rights: root's session never deletes
      // what the owner could not (a folder the owner may not write, a
      // sticky folder it does not own a file of).
      auto owner = owners.find(st.st_uid);
      if (owner == owners.end()) {
        owner = owners.emplace(st.st_uid, OwnerCredentials(st.st_uid, st.st_gid, caller)).first;
      }
      ScopedFsCredentials as_owner;
      if (!as_owner.Take(owner->second).ok()) continue;
      struct stat now;
      if (lstat(path.c_str(), &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
        continue;  // replaced since the check: not the file checked
      }
      if (::unlink(path.c_str()) != 0) continue;
    }
    if (shipped_copy) continue;
    Eviction eviction{FileName(path), *victim.tally};
    // Reported only in a trace of the file's owner: what another user
    // wrote into a file of its own is no evidence for someone else's trace.
    std::lock_guard<std::mutex> lock(mutex_);
    auto member = members_.find(victim.session);
    if (victim.session != session && member != members_.end() && member->second.uid == st.st_uid) {
      member->second.mailbox.push_back(std::move(eviction));
    } else if (evictor == st.st_uid) {
      to_report.push_back(std::move(eviction));
    }
  }
  return to_report;
}

absl::Status PrepareSharedDirectory(const std::string& path, std::optional<gid_t> group) {
  std::error_code error;
  if (std::filesystem::exists(path, error)) return absl::OkStatus();
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("create", path);
  if (!group) return absl::OkStatus();
  if (::chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    return ErrnoStatus(fmt::format("give to group {}", *group), path);
  }
  // chmod, not mkdir's mode: the umask would take the group's write away.
  if (::chmod(path.c_str(), S_ISVTX | 0770) != 0) return ErrnoStatus("chmod 01770", path);
  return absl::OkStatus();
}

std::shared_ptr<DirectoryBudget> DirectoryBudgets::For(const std::string& canonical_directory,
                                                       const WriterIdentity& identity) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(budgets_, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<DirectoryBudget>& slot = budgets_[{canonical_directory, identity}];
  std::shared_ptr<DirectoryBudget> budget = slot.lock();
  if (!budget) {
    budget = std::make_shared<DirectoryBudget>(canonical_directory, identity);
    slot = budget;
  }
  return budget;
}

}  // namespace loupe::format
