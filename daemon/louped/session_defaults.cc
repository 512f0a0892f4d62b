#include "daemon/louped/session_defaults.h"

#include <fmt/format.h>
#include <grp.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "daemon/base/status_util.h"
#include "daemon/control/session_options.h"
#include "daemon/ship/collector_connection.h"
#include "daemon/ship/collector_target.h"
#include "daemon/ship/outbox.h"

namespace loupe::louped {

session::SessionOptions SessionDefaults(const DaemonConfig& config) {
  session::SessionOptions defaults;
  defaults.sources.sample_hz = static_cast<uint32_t>(config.sample_hz);
  defaults.sources.ring_bytes = static_cast<uint32_t>(config.ring_buffer_size);
  defaults.sources.usdt_string_cap = static_cast<uint32_t>(config.string_cap);
  defaults.writer.directory = config.output_dir;
  defaults.writer.max_file_size = config.max_file_size;
  defaults.writer.max_total_size = config.max_total_size;
  defaults.writer.rotation_period_ns = config.rotation_period_s * 1'000'000'000;
  defaults.reorder_window_ns = config.reorder_window_ms * 1'000'000;
  defaults.drain_interval_ns = config.drain_interval_ms * 1'000'000;
  // A session that ends by itself just before a SIGTERM is past its Stop
  // deadline already (its wait has begun): half the shutdown budget at
  // most, so it still seals before the watchdog.
  defaults.symbol_wait_ns =
      std::min<uint64_t>(defaults.symbol_wait_ns, config.shutdown_timeout_s * 500'000'000);
  if (config.keep_shipped != 0) defaults.writer.shipped = ship::Outbox::ReleaseShippedCopy;
  // One budget per directory for all of this louped's sessions (the
  // manager keeps these defaults, so the registry lives as long as it), and
  // the identity by which they know their segments: a louped is its socket.
  defaults.writer.budgets = std::make_shared<format::DirectoryBudgets>();
  std::error_code error;
  defaults.writer.writer_id =
      fmt::format("louped {}", std::filesystem::absolute(config.socket, error).string());
  return defaults;
}

absl::Status CheckEffectiveConfig(const DaemonConfig& config) {
  constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
  if (config.socket.empty() || config.socket.size() > kMaxSocketPath) {
    return absl::InvalidArgumentError(
        fmt::format("socket = '{}': a path of 1 .. {} bytes", config.socket, kMaxSocketPath));
  }
  if (!config.output_dir.starts_with('/')) {
    return absl::InvalidArgumentError(fmt::format(
        "output_dir = '{}': an absolute directory path (louped's working directory is no "
        "caller's)",
        config.output_dir));
  }
  // Missing is fine (louped makes it); anything else stat says is not.
  struct stat st;
  if (::stat(config.output_dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return absl::InvalidArgumentError(fmt::format("output_dir = '{}': {}", config.output_dir,
                                                    std::strerror(errno)));
    }
  } else if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        fmt::format("output_dir = '{}': exists and is not a directory", config.output_dir));
  }
  // What startup refuses (exit 2), --check-config refuses too.
  if (!config.socket_group.empty() && ::getgrnam(config.socket_group.c_str()) == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("socket_group = '{}': no such group", config.socket_group));
  }
  // What the shipper reads at startup, as it reads it: the collector's
  // address, the token and CA files (no channel is made here: this runs
  // before louped starts threads).
  if (!config.collector.empty()) {
    if (absl::StatusOr<std::string> target = ship::ChannelTarget(config.collector); !target.ok()) {
      return target.status();
    }
    for (const auto& [path, what] : {std::pair{config.collector_token_file, "collector token file"},
                                     std::pair{config.collector_ca_file, "collector CA file"}}) {
      if (path.empty()) continue;
      if (absl::StatusOr<std::string> read = ship::ReadSecretFile(path, what); !read.ok()) {
        return read.status();
      }
    }
  }
  // Every attach reads targets there: it must be a procfs.
  struct statfs fs;
  if (::statfs(config.proc_root.c_str(), &fs) != 0) {
    return absl::InvalidArgumentError(
        fmt::format("proc_root = '{}': {}", config.proc_root, std::strerror(errno)));
  }
  if (fs.f_type != PROC_SUPER_MAGIC) {
    return absl::InvalidArgumentError(fmt::format(
        "proc_root = '{}': not a procfs (mount the host's /proc there, or leave it /proc)",
        config.proc_root));
  }
  // The settings through the builder every attach goes through: a request
  // naming only a pid (a placeholder: nothing is resolved) from root.
  v1::AttachRequest request;
  request.add_pids(1);
  request.set_session_id("check-config");
  absl::StatusOr<session::SessionOptions> options =
      control::BuildSessionOptions(SessionDefaults(config), request, control::AttachCaller{});
  if (!options.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{} (an attach would refuse these settings)", MessageOf(options.status())));
  }
  return absl::OkStatus();
}

}  // namespace loupe::louped
