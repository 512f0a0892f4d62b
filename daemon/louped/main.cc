// louped: the Loupe daemon. Loads the BPF programs per session, serves the
// control API on a unix socket, and on SIGTERM/SIGINT seals every session's
// trace before exiting 0.
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <grp.h>
#include <malloc.h>
#include <grpcpp/server_builder.h>
#include <signal.h>
#include <unistd.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <CLI/CLI.hpp>
#include <cstdarg>

#include "daemon/base/status_util.h"
#include "daemon/control/control_service.h"
#include "daemon/control/peer_listener.h"
#include "daemon/control/session_manager.h"
#include "daemon/format/directory_budget.h"
#include "daemon/format/leftovers.h"
#include "daemon/louped/config.h"
#include "daemon/louped/session_defaults.h"
#include "daemon/louped/shutdown_watchdog.h"
#include "daemon/louped/startup_checks.h"
#include "daemon/ship/shipper.h"
#include "daemon/symbols/debuginfod.h"

namespace {

using loupe::louped::DaemonConfig;

// The one mutable global allowed: libbpf's print callback has no context.
spdlog::logger* libbpf_log = nullptr;

int ForwardLibbpf(libbpf_print_level level, const char* format, va_list args) {
  if (libbpf_log == nullptr || level == LIBBPF_DEBUG) return 0;
  char line[1024];
  vsnprintf(line, sizeof line, format, args);
  std::string_view text(line);
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  libbpf_log->log(level == LIBBPF_WARN ? spdlog::level::warn : spdlog::level::info, "libbpf: {}",
                  text);
  return 0;
}

loupe::ship::ShipperOptions ShipperDefaults(const DaemonConfig& config) {
  loupe::ship::ShipperOptions options;
  options.collector = {config.collector, config.collector_token_file, config.collector_ca_file};
  options.directory = config.output_dir;
  options.keep_shipped = config.keep_shipped != 0;
  options.upload.rate_limit_bytes_per_s = config.ship_rate_limit;
  options.retry_max = std::chrono::seconds(config.ship_retry_max_s);
  return options;
}

void SealOwnLeftovers(const DaemonConfig& config, const std::shared_ptr<spdlog::logger>& log) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);  // as a session's header names it
  const loupe::format::WriterIdentity identity{
      host, loupe::louped::SessionDefaults(config).writer.writer_id};
  const loupe::format::LeftoverReport report =
      loupe::format::SealLeftovers(config.output_dir, identity);
  if (!report.sealed.empty()) {
    log->info("louped: sealed {} segment(s) an earlier run left unsealed ({} records), "
              "verdict incomplete: {}",
              report.sealed.size(), report.records, loupe::format::kLeftoverReason);
  }
  for (const std::string& failure : report.failures) {
    log->warn("louped: a segment an earlier run left unsealed stays so: {}", failure);
  }
}

// `watchdog` outlives everything made here: shutdown is bounded up to the
// last destructor.
int Run(const DaemonConfig& config, const std::shared_ptr<spdlog::logger>& log,
        loupe::louped::ShutdownWatchdog& watchdog) {
  loupe::symbols::ConfigureDebuginfod(config.debuginfod_urls);

  bool fatal = false;
  for (const loupe::louped::Finding& finding : loupe::louped::RunStartupChecks()) {
    log->log(finding.fatal ? spdlog::level::err : spdlog::level::warn, "{}", finding.line);
    fatal = fatal || finding.fatal;
  }
  if (fatal) {
    log->error("louped: cannot trace with what is missing above; not starting");
    return 1;
  }

  std::optional<gid_t> group;
  if (!config.socket_group.empty()) {
    const struct group* entry = getgrnam(config.socket_group.c_str());
    if (entry == nullptr) {
      log->error("socket_group: no group named '{}'", config.socket_group);
      return 2;
    }
    group = entry->gr_gid;
  }
  auto listener = loupe::control::PeerListener::Listen(config.socket, group);
  if (!listener.ok()) {
    log->error("{}", loupe::MessageOf(listener.status()));
    return 1;
  }
  // Callers write into the default directory as themselves (their own
  // rights, files they own): made writable for the socket's group if new.
  if (absl::Status status = loupe::format::PrepareSharedDirectory(config.output_dir, group);
      !status.ok()) {
    log->warn("output_dir: {}", loupe::MessageOf(status));
  }
  // Before any session starts: what an earlier run of this louped left
  // .active (killed, crashed, a trailer that never found room) is sealed as
  // it is, incomplete with the reason, so that it is read, shipped and
  // counted in the folder's budget like any other segment. Only this
  // louped's own files (host and writer id in the header) are touched.
  SealOwnLeftovers(config, log);
  std::unique_ptr<loupe::ship::Shipper> shipper;
  if (!config.collector.empty()) {
    auto started = loupe::ship::Shipper::Start(ShipperDefaults(config), log);
    if (!started.ok()) {
      log->error("shipping: {}", loupe::MessageOf(started.status()));
      return 2;
    }
    shipper = *std::move(started);
  }
  loupe::control::SessionManager sessions(
      {.defaults = loupe::louped::SessionDefaults(config),
       .max_sessions_per_user = static_cast<size_t>(config.max_sessions_per_user)},
      log);
  (*listener)->OnConnectionClosed(
      [&sessions](uint64_t connection) { sessions.ConnectionClosed(connection); });
  watchdog.SetPending([&sessions] { return sessions.Unfinished(); });
  std::function<loupe::v1::ShippingStatus()> shipping;
  if (shipper) shipping = [&shipper] { return shipper->Status(); };
  loupe::control::ControlService service(&sessions, listener->get(), shipping);
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    log->error("could not start the gRPC server");
    return 1;
  }
  (*listener)->Serve(server.get());
  log->info("louped: listening on {}, traces in {}{}", config.socket, config.output_dir,
            shipper ? fmt::format(", shipped to {}", config.collector) : std::string());
  // Type=notify: systemd starts what depends on louped only now that the
  // socket answers. Outside systemd (no NOTIFY_SOCKET) this does nothing.
  sd_notifyf(0, "READY=1\nSTATUS=listening on %s", config.socket.c_str());

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  int signal = 0;
  sigwait(&stop_signals, &signal);
  watchdog.Arm();
  log->info("louped: {} received, sealing every session (exiting within {} s)", strsignal(signal),
            config.shutdown_timeout_s);
  sd_notify(0, "STOPPING=1\nSTATUS=sealing sessions and shipping what is left");

  watchdog.Phase("closing the control socket");
  (*listener)->Stop();
  watchdog.Phase("sealing sessions");
  // Symbols are waited for until shortly before the watchdog, leaving time
  // to seal (and exit) whatever is still unresolved.
  const auto seal_margin = std::min<std::chrono::steady_clock::duration>(
      std::chrono::seconds(3), std::chrono::seconds(config.shutdown_timeout_s) / 5);
  sessions.StopAll(watchdog.deadline() - seal_margin);
  watchdog.Phase("finishing control calls");
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (shipper) {
    // Shipping gets what is left of the shutdown budget, less a second to exit.
    const auto deadline =
        std::min(std::chrono::steady_clock::now() +
                     std::chrono::seconds(config.ship_shutdown_timeout_s),
                 watchdog.deadline() - std::chrono::seconds(1));
    log->info("louped: shipping what is left (up to {} s)",
              std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(
                                       deadline - std::chrono::steady_clock::now())
                                       .count()));
    watchdog.Phase("shipping what is left");
    shipper->Drain(deadline);
  }
  watchdog.Phase("releasing sessions, the server and the shipper");
  watchdog.SetPending({});
  log->info("louped: stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // glibc gives threads arenas of their own, up to 8 per core, and each
  // keeps the high-water mark of the sessions that used it: attaching
  // (compiling unwind tables on a gRPC thread) left louped 8 MB larger per
  // arena touched, 40 MB after a few dozen sessions against 23 MB with one
  // arena. Two: the session and symbolizer threads still rarely contend.
  mallopt(M_ARENA_MAX, 2);
  // A fixed threshold: glibc raises it after each large block freed, and
  // then a session's large buffers (unwind rows, kallsyms addresses) come
  // from the arenas and stay there instead of going back to the kernel.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  // Blocked before any thread starts, so only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  CLI::App app{"louped: the Loupe tracing daemon"};
  std::string config_file = "/etc/loupe/louped.toml";
  if (const char* from_env = std::getenv("LOUPE_CONFIG")) config_file = from_env;
  CLI::Option* config_option =
      app.add_option("--config", config_file, "TOML config file (env LOUPE_CONFIG)")
          ->capture_default_str();
  bool check_only = false;
  app.add_flag("--check-config", check_only,
               "Load the configuration (file, environment, flags), report, and exit");
  // Every config key is also a flag; map nodes stay put, so CLI11 can bind them.
  std::map<std::string, std::string> values;
  std::map<std::string, CLI::Option*> given;
  for (const loupe::louped::ConfigKey& key : loupe::louped::ConfigKeys()) {
    std::string flag = key.name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    given[key.name] = app.add_option("--" + flag, values[key.name],
                                     fmt::format("{} (default {})", key.help, key.default_value));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  std::map<std::string, std::string> flags;
  for (const auto& [name, option] : given) {
    if (option->count() > 0) flags[name] = values[name];
  }
  // A file named on purpose (flag or LOUPE_CONFIG) must exist; only the
  // default path may be absent.
  const bool named_config = config_option->count() > 0 || std::getenv("LOUPE_CONFIG") != nullptr;
  absl::StatusOr<DaemonConfig> config = loupe::louped::LoadConfig(config_file, named_config, flags);
  if (!config.ok()) {
    fmt::print(stderr, "louped: {}\n", loupe::MessageOf(config.status()));
    return 2;
  }
  // The effective settings, as an attach will take them: louped does not
  // start with settings every attach would refuse.
  if (absl::Status status = loupe::louped::CheckEffectiveConfig(*config); !status.ok()) {
    fmt::print(stderr, "louped: {}\n", loupe::MessageOf(status));
    return 2;
  }
  if (check_only) {
    fmt::print("louped: configuration is valid\n");
    return 0;
  }
  // Read once by everything that opens /proc (daemon/base/proc_root.h);
  // set before any thread starts.
  setenv("LOUPE_PROC_ROOT", config->proc_root.c_str(), 1);
  auto log = spdlog::stderr_color_mt("louped");
  log->set_level(spdlog::level::from_str(config->log_level));
  // Parts without a logger of their own (the symbolizer) log through the default.
  spdlog::set_default_logger(log);
  libbpf_log = log.get();
  libbpf_set_print(ForwardLibbpf);
  int status = 0;
  {
    // The watchdog's report and hard exit take `grace` at most: both fit
    // in shutdown_timeout_s.
    const std::chrono::milliseconds timeout = std::chrono::seconds(config->shutdown_timeout_s);
    const std::chrono::milliseconds grace = std::min<std::chrono::milliseconds>(
        std::chrono::seconds(1), timeout / 5);
    loupe::louped::ShutdownWatchdog watchdog(timeout - grace, log, {}, grace);
    status = Run(*config, log, watchdog);
  }
  libbpf_log = nullptr;
  return status;
}
