// Who louped acts for: a caller's uid, gid and supplementary groups, and
// the switch of the calling thread's file-system identity to them.
//
// Contract 6 of the design: every file louped touches for a caller is
// checked and created with the caller's rights, never the daemon's. The
// kernel checks file access against a thread's fsuid/fsgid and groups, so
// louped takes them on around each such operation and gives them back
// after. Only the calling thread changes: the raw syscalls are used because
// glibc's setgroups (like setuid) broadcasts to every thread of the
// process, which would hand a caller's identity to other sessions' threads.
#ifndef LOUPE_DAEMON_BASE_CREDENTIALS_H_
#define LOUPE_DAEMON_BASE_CREDENTIALS_H_

#include <fmt/format.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/base/status_util.h"

namespace loupe {

struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary, sorted

  bool root() const { return uid == 0; }
  bool operator==(const Credentials&) const = default;
};

// The supplementary groups in a /proc/<pid>/status file, provided its real
// uid is still `uid` (a caller that exited may have had its pid reused by a
// process of someone else); nullopt otherwise.
inline std::optional<std::vector<gid_t>> ReadStatusGroups(const std::string& status_path,
                                                          uid_t uid) {
  std::ifstream in(status_path);
  std::string line;
  std::optional<uid_t> real_uid;
  std::optional<std::vector<gid_t>> groups;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "Uid:") {
      uid_t value = 0;
      if (fields >> value) real_uid = value;
    } else if (key == "Groups:") {
      groups.emplace();
      gid_t group = 0;
      while (fields >> group) groups->push_back(group);
    }
  }
  if (!real_uid || *real_uid != uid || !groups) return std::nullopt;
  std::sort(groups->begin(), groups->end());
  return groups;
}

// A socket peer's credentials: uid and gid as SO_PEERCRED gives them, groups
// from /proc/<pid>/status. SO_PEERCRED numbers the pid in louped's own PID
// namespace, so it is looked up in louped's /proc, not under proc_root
// (which numbers pids as the host does). When the groups cannot be read the
// caller gets none: fewer rights, never more.
inline Credentials PeerCredentialsOf(pid_t pid, uid_t uid, gid_t gid) {
  Credentials credentials{.uid = uid, .gid = gid};
  if (pid > 0) {
    if (std::optional<std::vector<gid_t>> groups =
            ReadStatusGroups(fmt::format("/proc/{}/status", pid), uid)) {
      credentials.groups = *std::move(groups);
    }
  }
  return credentials;
}

// While alive, the calling thread opens, creates, renames and deletes files
// as `credentials` would: fsuid, fsgid and supplementary groups are the
// caller's, and the capabilities that bypass file permissions are out of the
// thread's effective set (the kernel drops them itself only when the fsuid
// leaves 0; a louped running as a user with CAP_DAC_READ_SEARCH keeps them
// otherwise). Does nothing for no credentials or root's.
//
// Neither movable nor copyable: the identity belongs to the thread that took
// it and must be given back on that thread, at the end of the scope.
class ScopedFsCredentials {
 public:
  ScopedFsCredentials() = default;
  ~ScopedFsCredentials() { Restore(); }
  ScopedFsCredentials(const ScopedFsCredentials&) = delete;
  ScopedFsCredentials& operator=(const ScopedFsCredentials&) = delete;

  // Takes on `credentials`. On failure the thread is left as it was; the
  // usual cause is a louped without CAP_SETUID/CAP_SETGID serving a caller
  // of another uid.
  absl::Status Take(const std::optional<Credentials>& credentials) {
    if (taken_ || !credentials || credentials->root()) return absl::OkStatus();
    const Credentials& who = *credentials;
    taken_ = true;
    saved_fsuid_ = static_cast<uid_t>(syscall(SYS_setfsuid, -1));
    saved_fsgid_ = static_cast<gid_t>(syscall(SYS_setfsgid, -1));
    const long count = syscall(SYS_getgroups, 0, nullptr);
    if (count < 0) return Fail(ErrnoStatus("getgroups", "of louped"));
    saved_groups_.resize(static_cast<size_t>(count));
    if (count > 0 && syscall(SYS_getgroups, count, saved_groups_.data()) != count) {
      return Fail(ErrnoStatus("getgroups", "of louped"));
    }
    if (Caps(SYS_capget, saved_caps_) != 0) {
      return Fail(ErrnoStatus("capget", "of louped"));
    }
    caps_saved_ = true;

    std::vector<gid_t> sorted = saved_groups_;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != who.groups) {
      if (syscall(SYS_setgroups, who.groups.size(), who.groups.data()) != 0) {
        return Fail(Refused(who, "setgroups", "CAP_SETGID"));
      }
      groups_set_ = true;
    }
    // setfsuid/setfsgid return the previous value whether or not they
    // changed anything; asking again tells.
    syscall(SYS_setfsgid, who.gid);
    if (static_cast<gid_t>(syscall(SYS_setfsgid, -1)) != who.gid) {
      return Fail(Refused(who, "setfsgid", "CAP_SETGID"));
    }
    syscall(SYS_setfsuid, who.uid);
    if (static_cast<uid_t>(syscall(SYS_setfsuid, -1)) != who.uid) {
      return Fail(Refused(who, "setfsuid", "CAP_SETUID"));
    }
    __user_cap_data_struct caps[2] = {saved_caps_[0], saved_caps_[1]};
    for (int cap : kFileCaps) caps[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
    if (Caps(SYS_capset, caps) != 0) {
      return Fail(ErrnoStatus("capset", "dropping file capabilities"));
    }
    return absl::OkStatus();
  }

  bool taken() const { return taken_; }

 private:
  // The capabilities that let a thread past file permissions and owners.
  // The file capabilities, and CAP_SYS_PTRACE: it overrides the kernel's
  // ptrace-access check on /proc/<pid>/{root,maps,mem}, which as the caller
  // must be the caller's own.
  static constexpr int kFileCaps[] = {CAP_CHOWN,       CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
                                      CAP_FOWNER,      CAP_FSETID,       CAP_LINUX_IMMUTABLE,
                                      CAP_MKNOD,       CAP_MAC_OVERRIDE, CAP_SYS_PTRACE};

  // capget/capset with pid 0 read and set this thread's capabilities only.
  static long Caps(long call, __user_cap_data_struct* data) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    return syscall(call, &header, data);
  }

  static absl::Status Refused(const Credentials& who, std::string_view call,
                              std::string_view capability) {
    return absl::PermissionDeniedError(
        fmt::format("louped cannot act with the file rights of uid {} gid {} ({} needs {}): it "
                    "writes for a caller only as the caller",
                    who.uid, who.gid, call, capability));
  }

  absl::Status Fail(absl::Status status) {
    Restore();
    return status;
  }

  // Back to louped's own identity; the order undoes Take's. The fsuid goes
  // first: returning to 0 makes the kernel raise the file capabilities,
  // and the capset after it puts back exactly the saved set.
  void Restore() {
    if (!taken_) return;
    syscall(SYS_setfsuid, saved_fsuid_);
    if (caps_saved_) Caps(SYS_capset, saved_caps_);
    syscall(SYS_setfsgid, saved_fsgid_);
    if (groups_set_) syscall(SYS_setgroups, saved_groups_.size(), saved_groups_.data());
    taken_ = caps_saved_ = groups_set_ = false;
  }

  bool taken_ = false;
  bool caps_saved_ = false;
  bool groups_set_ = false;
  uid_t saved_fsuid_ = 0;
  gid_t saved_fsgid_ = 0;
  std::vector<gid_t> saved_groups_;
  __user_cap_data_struct saved_caps_[2] = {};
};

}  // namespace loupe

#endif  // LOUPE_DAEMON_BASE_CREDENTIALS_H_
