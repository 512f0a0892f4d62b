#include "daemon/session/exec_coverage.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>

namespace loupe::session {
namespace {

// The file a path names: /proc/PID/exe is a link to what the process runs.
std::string Resolved(const std::string& path) {
  std::error_code error;
  const std::filesystem::path target = std::filesystem::read_symlink(path, error);
  return error ? path : target.string();
}

}  // namespace

ExecCoverage::ExecCoverage(const probes::ProbePlan& plan, bool system_wide,
                           const std::vector<uint32_t>& pids, ExecutableOf executable_of)
    : system_wide_(system_wide), executable_of_(std::move(executable_of)) {
  for (const probes::ProbeAttachment& site : plan.attachments) {
    if (std::optional<FileId> id = IdOf(site.path)) probed_[system_wide ? 0 : site.pid].insert(*id);
  }
  for (uint32_t pid : pids) {
    if (std::optional<FileId> id = IdOf(executable_of_(pid))) running_[pid] = *id;
  }
}

std::optional<ExecCoverage::FileId> ExecCoverage::IdOf(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return FileId{info.st_dev, info.st_ino};
}

std::optional<std::string> ExecCoverage::OnExec(uint32_t pid, uint32_t old_tid) {
  const auto probed = probed_.find(system_wide_ ? 0 : pid);
  if (probed == probed_.end()) return std::nullopt;  // no probe was ever placed for it
  const std::string executable = executable_of_(pid);
  const std::optional<FileId> now = IdOf(executable);
  const auto before = running_.find(pid);
  const bool program_probed = before != running_.end() && probed->second.contains(before->second);
  if (now) running_[pid] = *now;
  if (!system_wide_ && old_tid != 0 && old_tid != pid) {
    return fmt::format(
        "pid {}: thread {} called exec, which ended the main thread its probes were placed for: "
        "none fires in the new image, so its requests from here on are not traced (attach again)",
        pid, old_tid);
  }
  if (program_probed && now && !probed->second.contains(*now)) {
    return fmt::format(
        "pid {} called exec into another program ({}): probes are placed at attach in the files "
        "it ran then, so its requests from here on are not traced (attach again)",
        pid, Resolved(executable));
  }
  return std::nullopt;
}

}  // namespace loupe::session
