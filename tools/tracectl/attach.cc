#include "tools/tracectl/attach.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <charconv>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "daemon/session/session.h"
#include "tools/tracectl/exit_codes.h"

namespace loupe::tracectl {
namespace {

// "10s", "250ms", "2m", "1h", or bare seconds.
absl::StatusOr<uint64_t> ParseDuration(const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [unit, ec] = std::from_chars(text.data(), end, value);
  const std::string_view suffix(unit, static_cast<size_t>(end - unit));
  uint64_t scale = 0;
  if (suffix.empty() || suffix == "s") scale = 1'000'000'000;
  if (suffix == "ms") scale = 1'000'000;
  if (suffix == "m") scale = 60'000'000'000;
  if (suffix == "h") scale = 3'600'000'000'000;
  if (ec != std::errc() || scale == 0 || value == 0) {
    return absl::InvalidArgumentError(
        fmt::format("--duration '{}': expected a positive number with s, ms, m or h", text));
  }
  return value * scale;
}

std::string DefaultSessionId() {
  time_t now = time(nullptr);
  tm local;
  localtime_r(&now, &local);
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}-{}", local.tm_year + 1900, local.tm_mon + 1,
                     local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec, getpid());
}

absl::StatusOr<session::SessionOptions> ToSessionOptions(const AttachOptions& o) {
  session::SessionOptions options;
  options.pids = o.pids;
  options.caller_uid = getuid();
  options.sources.sched = options.sources.cpu = false;
  for (const std::string& source : o.sources) {
    if (source == "sched") {
      options.sources.sched = true;
    } else if (source == "cpu") {
      options.sources.cpu = true;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("--sources: unknown source '{}' (known: sched, cpu)", source));
    }
  }
  options.sources.sample_hz = o.hz;
  options.sources.follow_children = o.follow_children;
  options.sources.ring_bytes = o.ring_buffer_size;
  if (o.sample_event == "cycles") {
    options.sources.sample_event = bpf::SampleEvent::kCycles;
  } else if (o.sample_event != "cpu-clock") {
    return absl::InvalidArgumentError(fmt::format(
        "--sample-event '{}': expected cpu-clock or cycles", o.sample_event));
  }
  if (!o.duration.empty()) {
    absl::StatusOr<uint64_t> duration = ParseDuration(o.duration);
    if (!duration.ok()) return duration.status();
    options.duration_ns = *duration;
  }
  options.writer.directory = o.output;
  options.writer.session_id = o.session_id.empty() ? DefaultSessionId() : o.session_id;
  return options;
}

}  // namespace

void AddAttachCommand(CLI::App& app, AttachOptions& options) {
  CLI::App* attach = app.add_subcommand("attach", "Trace running processes");
  attach->add_option("pids", options.pids, "Process ids to trace")->required();
  attach->add_option("-d,--duration", options.duration,
                     "Stop after this long (10s, 500ms, 2m); default: Ctrl-C");
  attach->add_option("--hz", options.hz, "CPU sampling frequency")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  attach->add_flag("--follow-children", options.follow_children,
                   "Also trace processes the targets fork after attach");
  attach->add_option("-o,--output", options.output, "Directory for the segments")
      ->capture_default_str();
  attach->add_option("--sources", options.sources, "Data sources: sched, cpu")
      ->delimiter(',')
      ->capture_default_str();
  attach->add_option("--sample-event", options.sample_event,
                     "cpu-clock (software) or cycles (hardware PMU)")
      ->capture_default_str();
  attach->add_option("--ring-buffer-size", options.ring_buffer_size,
                     "BPF ring buffer bytes (a power of two)")
      ->capture_default_str();
  attach->add_option("--session-id", options.session_id, "Name of the session's files");
  attach->add_flag("-q,--quiet", options.quiet, "No live progress");
}

int RunAttach(const AttachOptions& attach) {
  absl::StatusOr<session::SessionOptions> options = ToSessionOptions(attach);
  if (!options.ok()) return Fail(options.status());

  // Ctrl-C and SIGTERM end the session cleanly: they are waited for, not handled.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto log = spdlog::stderr_color_mt("tracectl");
  log->set_level(attach.quiet ? spdlog::level::warn : spdlog::level::info);
  fmt::print(stderr, "tracectl: no louped answering; tracing in this process (embedded mode)\n");
  absl::StatusOr<std::unique_ptr<session::Session>> session =
      session::Session::Start(*std::move(options), log);
  if (!session.ok()) return Fail(session.status());

  const bool live = !attach.quiet && isatty(STDERR_FILENO);
  uint64_t last_events = 0;
  while (true) {
    timespec second{1, 0};
    const int signal = sigtimedwait(&stop_signals, nullptr, &second);
    if (signal == SIGINT || signal == SIGTERM) break;
    if ((*session)->WaitFinished(0)) break;
    if (live) {
      const session::SessionStats stats = (*session)->stats();
      uint64_t lost = 0;
      for (const auto& [what, count] : stats.losses) lost += count;
      fmt::print(stderr, "\r{} events/s, {} events, {} lost, {:.1f} MB written   ",
                 stats.events - last_events, stats.events, lost,
                 static_cast<double>(stats.bytes_written) / 1e6);
      last_events = stats.events;
    }
  }
  if (live) fmt::print(stderr, "\n");
  absl::Status stopped = (*session)->Stop();
  const session::SessionStats stats = (*session)->stats();
  if (!stopped.ok()) return Fail(stopped);

  uint64_t lost = 0;
  for (const auto& [what, count] : stats.losses) lost += count;
  fmt::print("trace: {}/{}-*.loupe ({} segment(s), {} events, {:.1f} MB)\n", stats.directory,
             stats.id, stats.segments, stats.events,
             static_cast<double>(stats.bytes_written) / 1e6);
  if (lost == 0) {
    fmt::print("verdict: complete\n");
    return kExitOk;
  }
  for (const auto& [what, count] : stats.losses) fmt::print("lost {} ({})\n", count, what);
  fmt::print("verdict: INCOMPLETE\n");
  return kExitIncomplete;
}

}  // namespace loupe::tracectl
