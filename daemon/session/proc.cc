#include "daemon/session/proc.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <sstream>

#include "daemon/base/proc_root.h"
#include "daemon/base/read_file.h"
#include "daemon/base/scoped_fd.h"

namespace loupe::session {
namespace {

namespace fs = std::filesystem;

constexpr unsigned kPfKthread = 0x00200000;  // PF_KTHREAD in stat's flags

bool ReadText(const std::string& path, std::string* out) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return false;
  *out = *std::move(text);
  return true;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The fields of a stat line after the ")" that ends the command name.
std::vector<std::string> StatFields(const std::string& stat) {
  std::vector<std::string> fields;
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return fields;
  std::istringstream in(stat.substr(paren + 1));
  for (std::string field; in >> field;) fields.push_back(field);
  return fields;  // fields[0] is field 3 (state)
}

uint64_t ToNumber(const std::string& text) {
  uint64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// The values of a "Key:\t1\t2" line of a status file.
std::vector<uint64_t> StatusValues(const std::string& status, std::string_view key) {
  std::vector<uint64_t> values;
  std::istringstream lines(status);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') continue;
    std::istringstream in(line.substr(key.size() + 1));
    for (uint64_t v; in >> v;) values.push_back(v);
    break;
  }
  return values;
}

absl::Status NoProcess(uint32_t pid) {
  return absl::NotFoundError(fmt::format("no process with pid {}", pid));
}

uint64_t NamespaceInode(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

absl::StatusOr<uint64_t> ReadStartTime(uint32_t pid) {
  std::string stat;
  if (!ReadText(ProcPath(pid, "/stat"), &stat)) return NoProcess(pid);
  const std::vector<std::string> fields = StatFields(stat);
  if (fields.size() < 20) return absl::DataLossError(fmt::format("{}: unreadable", ProcPath(pid, "/stat")));
  return ToNumber(fields[19]);  // field 22
}

absl::StatusOr<ThreadIdentity> ReadThread(uint32_t pid, uint32_t tid) {
  ThreadIdentity thread{.tid = tid, .ns_tid = tid};
  const std::string dir = ProcPath(pid, fmt::format("/task/{}", tid));
  std::string status;
  if (!ReadText(dir + "/status", &status)) {
    return absl::NotFoundError(fmt::format("no thread {} in process {}", tid, pid));
  }
  const std::vector<uint64_t> ns = StatusValues(status, "NSpid");
  if (!ns.empty()) thread.ns_tid = static_cast<uint32_t>(ns.back());
  std::string comm;
  if (ReadText(dir + "/comm", &comm)) thread.name = Trimmed(comm);
  return thread;
}

absl::StatusOr<ProcessIdentity> ReadProcess(uint32_t pid) {
  ProcessIdentity process{.pid = pid, .ns_pid = pid};
  const std::string dir = ProcPath(pid);
  std::string stat, status;
  if (!ReadText(dir + "/stat", &stat) || !ReadText(dir + "/status", &status)) {
    return NoProcess(pid);
  }
  const std::vector<std::string> fields = StatFields(stat);
  if (fields.size() < 20) return absl::DataLossError(fmt::format("{}/stat: unreadable", dir));
  process.state = fields[0].empty() ? '?' : fields[0][0];
  process.ppid = static_cast<uint32_t>(ToNumber(fields[1]));
  process.kernel_thread = (ToNumber(fields[6]) & kPfKthread) != 0;  // field 9: flags
  process.start_time = ToNumber(fields[19]);
  if (const auto uid = StatusValues(status, "Uid"); !uid.empty()) {
    process.uid = static_cast<uint32_t>(uid[0]);
    struct stat owner;
    process.plain_user = uid.size() == 4 &&
                         std::all_of(uid.begin(), uid.end(),
                                     [&](uint64_t id) { return id == process.uid; }) &&
                         ::stat((dir + "/mem").c_str(), &owner) == 0 && owner.st_uid == process.uid;
  }
  if (const auto tgid = StatusValues(status, "Tgid"); !tgid.empty()) {
    process.tgid = static_cast<uint32_t>(tgid[0]);
  }
  if (const auto ns = StatusValues(status, "NSpid"); !ns.empty()) {
    process.ns_pid = static_cast<uint32_t>(ns.back());
  }
  std::string comm;
  if (ReadText(dir + "/comm", &comm)) process.name = Trimmed(comm);
  std::error_code error;
  process.exe = fs::read_symlink(dir + "/exe", error).string();
  for (const fs::directory_entry& task : fs::directory_iterator(dir + "/task", error)) {
    const uint32_t tid = static_cast<uint32_t>(ToNumber(task.path().filename().string()));
    if (absl::StatusOr<ThreadIdentity> thread = ReadThread(pid, tid); thread.ok()) {
      process.threads[tid] = *std::move(thread);
    }
  }
  return process;
}

std::vector<uint32_t> Descendants(uint32_t pid) {
  std::multimap<uint32_t, uint32_t> children;  // by parent
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(ProcRoot(), error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat;
    if (!ReadText(entry.path().string() + "/stat", &stat)) continue;  // exited meanwhile
    const std::vector<std::string> fields = StatFields(stat);
    if (fields.size() < 2) continue;
    children.emplace(static_cast<uint32_t>(ToNumber(fields[1])),
                     static_cast<uint32_t>(ToNumber(name)));
  }
  std::vector<uint32_t> out;
  std::vector<uint32_t> parents{pid};
  for (size_t next = 0; next < parents.size(); ++next) {
    auto [begin, end] = children.equal_range(parents[next]);
    for (auto it = begin; it != end; ++it) {
      out.push_back(it->second);
      parents.push_back(it->second);
    }
  }
  return out;
}

absl::StatusOr<uint32_t> GlobalPid(uint32_t caller_pid, uint32_t pid) {
  // The caller is louped's peer: its pid and namespace are read in louped's
  // own /proc.
  const uint64_t caller_ns = NamespaceInode(fmt::format("/proc/{}/ns/pid", caller_pid));
  if (caller_ns == 0) return absl::NotFoundError(fmt::format("caller {} is gone", caller_pid));
  if (PidsAreLocal() && caller_ns == NamespaceInode("/proc/self/ns/pid")) return pid;

  // A process whose pid namespace is the caller's, or nested in it, and
  // whose pid at the caller's level is `pid`: walk each candidate's
  // namespace ancestry up to the caller's.
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(ProcRoot(), error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string status;
    if (!ReadText(entry.path().string() + "/status", &status)) continue;
    const std::vector<uint64_t> ids = StatusValues(status, "NSpid");
    if (std::find(ids.begin(), ids.end(), pid) == ids.end()) continue;
    ScopedFd ns(::open((entry.path().string() + "/ns/pid").c_str(), O_RDONLY | O_CLOEXEC));
    for (size_t level = ids.size(); ns.valid() && level > 0; --level) {
      struct stat st;
      if (fstat(ns.get(), &st) != 0) break;
      if (st.st_ino == caller_ns) {
        if (ids[level - 1] == pid) return static_cast<uint32_t>(ToNumber(name));
        break;
      }
      ns.Reset(::ioctl(ns.get(), NS_GET_PARENT));
    }
  }
  return absl::NotFoundError(
      fmt::format("no process with pid {} in the PID namespace of caller {}", pid, caller_pid));
}

}  // namespace loupe::session
