#include "daemon/louped/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>

namespace loupe::louped {
namespace {

struct Binding {
  const char* name;
  const char* help;
  std::string DaemonConfig::*text = nullptr;
  uint64_t DaemonConfig::*number = nullptr;
  uint64_t min = 0, max = 0;
};

const Binding kBindings[] = {
    {"socket", "control socket path", &DaemonConfig::socket},
    {"socket_group", "group allowed to use the socket (empty: root only)", &DaemonConfig::socket_group},
    {"output_dir", "where sessions write segments unless told otherwise",
     &DaemonConfig::output_dir},
    {"log_level", "trace, debug, info, warn, error", &DaemonConfig::log_level},
    {"sample_hz", "default CPU sampling frequency", nullptr, &DaemonConfig::sample_hz, 1, 10'000},
    {"ring_buffer_size",
     "BPF ring buffer bytes per session (a power of two); also the most a caller other than root "
     "may ask for",
     nullptr, &DaemonConfig::ring_buffer_size, 4096, 1ull << 30},
    {"max_sessions_per_user",
     "sessions a caller other than root may have at once (starting, running or ending)", nullptr,
     &DaemonConfig::max_sessions_per_user, 1, 4096},
    {"string_cap", "bytes kept of a USDT string argument (longer ones are cut, and counted)",
     nullptr, &DaemonConfig::string_cap, 16, 4096},
    {"max_file_size", "segment size limit (bytes)", nullptr, &DaemonConfig::max_file_size, 64 << 10,
     16ull << 30},
    {"max_total_size", "disk budget per output directory (bytes)", nullptr,
     &DaemonConfig::max_total_size, 128 << 10, 1ull << 50},
    {"rotation_period_s", "seal a segment this old (0: by size only)", nullptr,
     &DaemonConfig::rotation_period_s, 0, 7 * 86'400},
    {"reorder_window_ms", "how long events wait to be put in time order", nullptr,
     &DaemonConfig::reorder_window_ms, 1, 10'000},
    {"drain_interval_ms", "ring buffer polling interval when not busy", nullptr,
     &DaemonConfig::drain_interval_ms, 1, 1000},
    {"debuginfod_urls", "debuginfod servers for missing debug files (empty: none)",
     &DaemonConfig::debuginfod_urls},
    {"proc_root",
     "the host's procfs, where processes are found by global pid (a louped in its own PID "
     "namespace, e.g. a pod's sidecar, gets the host's /proc mounted e.g. at /host/proc)",
     &DaemonConfig::proc_root},
    {"collector",
     "loupe-collector host:port to ship sealed segments to, or a list IP:port,IP:port of "
     "collectors sharing one store, used round robin (empty: keep them local)",
     &DaemonConfig::collector},
    {"collector_token_file", "file holding this daemon's bearer token for the collector (empty: none)",
     &DaemonConfig::collector_token_file},
    {"collector_ca_file", "PEM roots to check the collector's TLS certificate (empty: plaintext)",
     &DaemonConfig::collector_ca_file},
    {"keep_shipped", "1: keep local copies of shipped segments (still within max_total_size)",
     nullptr, &DaemonConfig::keep_shipped, 0, 1},
    {"ship_rate_limit", "bytes per second the shipper may send (0: no limit)", nullptr,
     &DaemonConfig::ship_rate_limit, 0, 1ull << 40},
    {"ship_retry_max_s", "longest wait between shipping attempts", nullptr,
     &DaemonConfig::ship_retry_max_s, 1, 3600},
    {"ship_shutdown_timeout_s", "on shutdown, how long to try shipping what is left", nullptr,
     &DaemonConfig::ship_shutdown_timeout_s, 0, 3600},
    {"shutdown_timeout_s",
     "on SIGTERM, louped exits within this long whatever is stuck (sealing, shipping), naming it",
     nullptr, &DaemonConfig::shutdown_timeout_s, 1, 3600},
};

absl::Status Apply(const Binding& key, const std::string& value, const std::string& origin,
                   DaemonConfig* config) {
  if (key.text != nullptr) {
    if (std::string_view(key.name) == "log_level" && value != "trace" && value != "debug" &&
        value != "info" && value != "warn" && value != "error") {
      return absl::InvalidArgumentError(fmt::format(
          "{} ({}): '{}' is not one of trace, debug, info, warn, error", key.name, origin, value));
    }
    config->*key.text = value;
    return absl::OkStatus();
  }
  uint64_t number = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (ec != std::errc() || end != value.data() + value.size() || number < key.min ||
      number > key.max) {
    return absl::InvalidArgumentError(fmt::format("{} ({}): '{}' is not a whole number in {} .. {}",
                                                  key.name, origin, value, key.min, key.max));
  }
  config->*key.number = number;
  return absl::OkStatus();
}

const Binding* Find(std::string_view name) {
  for (const Binding& key : kBindings) {
    if (name == key.name) return &key;
  }
  return nullptr;
}

std::string EnvName(std::string_view key) {
  std::string name = "LOUPE_";
  for (char c : key) name.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return name;
}

}  // namespace

const std::vector<ConfigKey>& ConfigKeys() {
  static const std::vector<ConfigKey>* keys = [] {
    auto* list = new std::vector<ConfigKey>();
    const DaemonConfig defaults;
    for (const Binding& key : kBindings) {
      list->push_back({key.name, key.help,
                       key.text ? defaults.*key.text : std::to_string(defaults.*key.number)});
    }
    return list;
  }();
  return *keys;
}

absl::StatusOr<DaemonConfig> LoadConfig(const std::string& file, bool file_required,
                                        const std::map<std::string, std::string>& flags) {
  DaemonConfig config;
  std::error_code error;
  if (!file.empty() && std::filesystem::exists(file, error)) {
    toml::table table;
    try {
      table = toml::parse_file(file);
    } catch (const toml::parse_error& parse) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: {}", file, parse.source().begin.line, parse.description()));
    }
    for (const auto& [name, node] : table) {
      const Binding* key = Find(name.str());
      if (key == nullptr) {
        return absl::InvalidArgumentError(fmt::format("{}: unknown key '{}'", file, name.str()));
      }
      std::string value;
      // A path or name must be a TOML string (output_dir = 5 is a mistake,
      // not the folder "5"); a number may be written either way.
      if (const auto* text = node.as_string()) {
        value = text->get();
      } else if (const auto* integer = node.as_integer();
                 integer && integer->get() >= 0 && key->text == nullptr) {
        value = std::to_string(integer->get());
      } else {
        return absl::InvalidArgumentError(
            fmt::format("{}: key '{}' must be a {}", file, name.str(),
                        key->text ? "string" : "non-negative integer"));
      }
      if (absl::Status status = Apply(*key, value, file, &config); !status.ok()) return status;
    }
  } else if (file_required) {
    return absl::NotFoundError(fmt::format("config file {} does not exist", file));
  }
  for (const Binding& key : kBindings) {
    const std::string env = EnvName(key.name);
    if (const char* value = std::getenv(env.c_str())) {
      if (absl::Status status = Apply(key, value, env, &config); !status.ok()) return status;
    }
  }
  for (const auto& [name, value] : flags) {
    const Binding* key = Find(name);
    if (key == nullptr) return absl::InvalidArgumentError(fmt::format("unknown flag --{}", name));
    if (absl::Status status = Apply(*key, value, "flag", &config); !status.ok()) return status;
  }
  return config;
}

}  // namespace loupe::louped
