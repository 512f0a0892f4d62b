// louped's configuration: one table of keys, each settable in the TOML file
// (/etc/loupe/louped.toml), as LOUPE_<KEY> in the environment, and as
// --<key-with-dashes> on the command line, in that order of precedence
// (flags win). docs/operations.md lists them.
#ifndef LOUPE_DAEMON_LOUPED_CONFIG_H_
#define LOUPE_DAEMON_LOUPED_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace loupe::louped {

struct DaemonConfig {
  std::string socket = "/run/loupe/louped.sock";
  std::string socket_group;  // who may connect besides root; empty: root only
  std::string output_dir = "/var/lib/loupe/traces";
  std::string log_level = "info";
  uint64_t sample_hz = 99;
  uint64_t ring_buffer_size = 4 << 20;  // also the most a caller other than root may ask for
  uint64_t max_sessions_per_user = 8;   // at once, per caller other than root
  uint64_t string_cap = 256;
  uint64_t max_file_size = 64ull << 20;
  uint64_t max_total_size = 1ull << 30;
  uint64_t rotation_period_s = 60;
  uint64_t reorder_window_ms = 50;
  uint64_t drain_interval_ms = 10;
  std::string debuginfod_urls;  // empty: no debuginfod server is asked
  std::string proc_root = "/proc";  // the host's procfs when louped has a PID namespace of its own
  // Shipping (docs/operations.md); no collector: segments stay local.
  std::string collector;
  std::string collector_token_file;
  std::string collector_ca_file;
  uint64_t keep_shipped = 0;
  uint64_t ship_rate_limit = 0;
  uint64_t ship_retry_max_s = 30;
  uint64_t ship_shutdown_timeout_s = 10;
  // SIGTERM: every session sealed and louped gone within this long, whatever
  // failed before; past it louped logs what is stuck and exits anyway.
  uint64_t shutdown_timeout_s = 30;
};

struct ConfigKey {
  std::string name;
  std::string help;
  std::string default_value;
};
const std::vector<ConfigKey>& ConfigKeys();

// Values by key from each layer; later layers override earlier ones.
// `file` may be empty (no file). Unknown keys and bad values are errors
// naming the key, where it came from, and what is allowed.
absl::StatusOr<DaemonConfig> LoadConfig(const std::string& file, bool file_required,
                                        const std::map<std::string, std::string>& flags);

}  // namespace loupe::louped

#endif  // LOUPE_DAEMON_LOUPED_CONFIG_H_
