#include "tools/tracectl/attach.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "daemon/control/session_options.h"
#include "daemon/session/session.h"
#include "daemon/symbols/debuginfod.h"
#include "tools/tracectl/daemon_client.h"
#include "daemon/format/loss_tally.h"
#include "tools/tracectl/durations.h"
#include "tools/tracectl/exit_codes.h"

namespace loupe::tracectl {
namespace {

std::string DefaultSessionId() {
  time_t now = time(nullptr);
  tm local;
  localtime_r(&now, &local);
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}-{}", local.tm_year + 1900, local.tm_mon + 1,
                     local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec, getpid());
}

// The flags as the request louped takes; embedded mode builds its options
// from the same request with the same builder.
absl::StatusOr<v1::AttachRequest> ToAttachRequest(const AttachOptions& o) {
  v1::AttachRequest request;
  for (uint32_t pid : o.pids) request.add_pids(pid);
  for (const std::string& source : o.sources) request.add_sources(source);
  request.set_sample_hz(o.hz);
  request.set_sample_event(o.sample_event);
  request.set_follow_children(o.follow_children);
  request.set_ring_buffer_size(o.ring_buffer_size);
  request.set_string_cap(o.string_cap);
  request.set_offcpu_stacks(o.offcpu_stacks);
  request.set_unwind(o.unwind);
  for (const std::string& usdt : o.usdt) request.add_usdt(usdt);
  for (const std::string& uprobe : o.uprobes) request.add_uprobes(uprobe);
  request.set_content_policy(o.content_policy);
  if (!o.duration.empty()) {
    absl::StatusOr<uint64_t> duration = ParseDuration(o.duration, "--duration");
    if (!duration.ok()) return duration.status();
    request.set_duration_ms(std::max<uint64_t>(1, *duration / 1'000'000));
  }
  request.set_session_id(o.session_id);
  request.set_detached(o.detached);
  return request;
}

}  // namespace

void AddAttachCommand(CLI::App& app, AttachOptions& options) {
  CLI::App* attach = app.add_subcommand("attach", "Trace running processes");
  attach->add_option("pids", options.pids, "Process ids to trace")->required();
  attach->add_option("-d,--duration", options.duration,
                     "Stop after this long (10s, 500ms, 2m); default: Ctrl-C");
  attach->add_option("--hz", options.hz, "CPU sampling frequency (default 99, or louped's)")
      ->check(CLI::Range(1, 10000));
  attach->add_flag("--follow-children", options.follow_children,
                   "Also trace the targets' child processes: those running at attach and those forked after");
  attach
      ->add_option("-o,--output", options.output,
                   "Directory for the segments (default: louped's, or ./loupe-traces)")
      ->each([&options](const std::string&) { options.output_given = true; });
  attach
      ->add_option("--usdt", options.usdt,
                   "USDT probes of the targets and their libraries: 'provider:name', globs "
                   "allowed; 'prov:name(str arg0)' also keeps a string argument; one per --usdt, "
                   "repeat it for more")
      ->allow_extra_args(false);
  attach
      ->add_option("--uprobe", options.uprobes,
                   "Functions to probe: 'TARGET:SYMBOL[+OFFSET][(N)][%return]' (TARGET a path or "
                   "a name like libc; N integer arguments to keep; %return adds latency), or "
                   "'TARGET+0xOFFSET[(N)][%return]' for the function holding a frame as stacks "
                   "print it (a stripped binary's static function); one per --uprobe, repeat it "
                   "for more")
      ->allow_extra_args(false);
  attach
      ->add_option("--content-policy", options.content_policy,
                   "String values from the application: names (kept as length + hash) or full")
      ->capture_default_str();
  attach->add_option("--sources", options.sources, "Data sources: sched, cpu, shim")
      ->delimiter(',')
      ->capture_default_str();
  attach
      ->add_option("--sample-event", options.sample_event,
                   "cpu-clock (software) or cycles (hardware PMU)")
      ->capture_default_str();
  attach
      ->add_option("--offcpu-stacks", options.offcpu_stacks,
                   "Stacks taken at switch-out: user,kernel / user / kernel / none")
      ->capture_default_str();
  attach
      ->add_option("--unwind", options.unwind,
                   "User stacks: cfi (unwind tables from .eh_frame, for code without frame "
                   "pointers) or fp (frame pointers only: cheaper, wrong through such code)")
      ->capture_default_str();
  attach->add_option("--ring-buffer-size", options.ring_buffer_size,
                     "BPF ring buffer bytes, a power of two (default 4 MiB, or louped's)");
  attach->add_option("--string-cap", options.string_cap,
                     "Bytes kept of a USDT (str argN) argument, 16 .. 4096 (default 256, or "
                     "louped's); longer strings are cut and counted as cut");
  attach->add_option("--session-id", options.session_id, "Name of the session's files");
  attach->add_option("--ring-capture", options.ring_capture,
                     "Embedded mode only: also keep the ring bytes drained, to replay them "
                     "(tests/bench/pipeline_bench)");
  attach->add_flag("-q,--quiet", options.quiet, "No live progress");
  attach->add_flag("--detach,--detached", options.detached,
                   "Through louped only: start the session and return; it runs until "
                   "`tracectl detach`, --duration or its targets exit (without it, the session "
                   "ends when this tracectl does, even killed)");
}

namespace {

struct Outcome {
  std::string directory, id;
  uint64_t segments = 0, events = 0, bytes = 0;
  std::map<std::string, uint64_t> losses;
  std::string end_error;  // the session's end failed: a segment not written or sealed
  // What was asked and not traced (probes not placed, a target that exec'd
  // past its probes), as the trailers' notes say it to verify and report.
  std::vector<std::string> notes;
};

// The figures are printed whatever happened at the end: a full disk is a
// trace with losses (counted), not a failed command.
int PrintOutcome(const Outcome& outcome) {
  fmt::print("trace: {}/{}-*.loupe ({} segment(s), {} events, {:.1f} MB)\n", outcome.directory,
             outcome.id, outcome.segments, outcome.events,
             static_cast<double>(outcome.bytes) / 1e6);
  const format::LossTally tally = format::TallyLosses(outcome.losses);
  for (const std::string& line : tally.Lines()) fmt::print("{}\n", line);
  for (const std::string& note : outcome.notes) fmt::print("note: {}\n", note);
  if (!outcome.end_error.empty()) fmt::print("error at the end: {}\n", outcome.end_error);
  const bool complete = tally.complete() && outcome.end_error.empty();
  fmt::print("verdict: {}\n", complete ? "complete" : "INCOMPLETE");
  return complete ? kExitOk : kExitIncomplete;
}

// Probes that did not make it are named; the session runs without them.
void PrintProbes(uint32_t sites, const std::vector<std::string>& warnings) {
  if (sites != 0) fmt::print(stderr, "tracectl: {} probe site(s) attached\n", sites);
  for (const std::string& warning : warnings) fmt::print(stderr, "tracectl: warning: {}\n", warning);
}

void PrintProgress(uint64_t events, uint64_t per_second, uint64_t lost, uint64_t bytes) {
  fmt::print(stderr, "\r{} events/s, {} events, {} lost, {:.1f} MB written   ", per_second, events,
             lost, static_cast<double>(bytes) / 1e6);
}

uint64_t TotalLost(const auto& losses) {
  uint64_t lost = 0;
  for (const auto& [what, count] : losses) lost += count;
  return lost;
}

sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

// Through louped: the daemon traces, this process watches and detaches.
// The session lives as long as this process's connection, unless detached.
int AttachThroughDaemon(DaemonClient& daemon, const AttachOptions& attach,
                        v1::AttachRequest request) {
  if (attach.output_given) {  // the daemon's working directory is not ours
    request.set_output_dir(std::filesystem::absolute(attach.output).string());
  }
  absl::StatusOr<v1::AttachResponse> attached = daemon.Attach(request);
  if (!attached.ok()) return Fail(attached.status());
  fmt::print(stderr, "tracectl: louped is tracing; session {}\n", attached->session_id());
  PrintProbes(attached->probe_sites(),
              std::vector<std::string>(attached->warnings().begin(), attached->warnings().end()));
  if (attach.detached) {
    fmt::print("session {} runs in louped (writing to {}); end it with: tracectl detach {}\n",
               attached->session_id(), attached->output_dir(), attached->session_id());
    return kExitOk;
  }

  const bool live = !attach.quiet && isatty(STDERR_FILENO);
  std::atomic<bool> ended = false;
  v1::SessionStatus last;
  std::mutex last_mutex;
  std::thread watcher([&] {
    uint64_t previous = 0;
    absl::Status watched =
        daemon.Watch(attached->session_id(), 1000, [&](const v1::SessionStatus& status) {
          if (live) {
            PrintProgress(status.events(), status.events() - previous, TotalLost(status.losses()),
                          status.bytes_written());
          }
          previous = status.events();
          std::lock_guard<std::mutex> lock(last_mutex);
          last = status;
          return true;
        });
    ended = true;
  });
  const sigset_t stop = StopSignals();
  bool interrupted = false;
  while (!ended) {
    timespec tick{0, 200'000'000};
    const int signal = sigtimedwait(&stop, nullptr, &tick);
    if (signal == SIGINT || signal == SIGTERM) {
      interrupted = true;
      break;
    }
  }
  absl::StatusOr<v1::SessionStatus> final_status = daemon.Detach(attached->session_id());
  watcher.join();
  if (live) fmt::print(stderr, "\n");
  if (!final_status.ok() && final_status.status().code() == absl::StatusCode::kUnavailable) {
    // louped went away (stopped, crashed, restarted): the session went with
    // it, and what it wrote is all there is; only the files can tell.
    fmt::print(stderr,
               "tracectl: lost louped while tracing ({}); session {} ended with it. What it "
               "wrote is in {}: check it with tracectl verify\n",
               MessageOf(final_status.status()), attached->session_id(), attached->output_dir());
    return kExitError;
  }
  if (!final_status.ok()) {
    if (interrupted || final_status.status().code() != absl::StatusCode::kNotFound) {
      return Fail(final_status.status());
    }
    std::lock_guard<std::mutex> lock(last_mutex);
    final_status = last;
  }
  // The directory as asked for: louped names it as UTF-8 text (U+FFFD for
  // other bytes), which is not a path to copy.
  Outcome outcome{request.output_dir().empty() ? final_status->output_dir() : request.output_dir(),
                  final_status->session_id(), final_status->segments(),
                  final_status->events(), final_status->bytes_written()};
  for (const auto& [what, count] : final_status->losses()) outcome.losses[what] = count;
  outcome.end_error = final_status->end_error();
  outcome.notes.assign(final_status->warnings().begin(), final_status->warnings().end());
  if (!interrupted && !final_status->ended_because().empty()) {
    fmt::print(stderr, "tracectl: session {} ended in louped: {}\n", final_status->session_id(),
               final_status->ended_because());
  }
  return PrintOutcome(outcome);
}

int AttachEmbedded(const AttachOptions& attach, v1::AttachRequest request) {
  if (attach.detached) {
    return Fail(absl::FailedPreconditionError(fmt::format(
        "--detach needs louped (none answers on {}): an embedded session ends with tracectl",
        attach.socket)));
  }
  if (request.session_id().empty()) request.set_session_id(DefaultSessionId());
  request.set_output_dir(attach.output);
  control::AttachCaller caller{.uid = getuid(), .gid = getgid(), .in_process = true};
  absl::StatusOr<session::SessionOptions> options =
      control::BuildSessionOptions(control::EmbeddedDefaults(), request, caller);
  if (!options.ok()) return Fail(options.status());
  options->ring_capture_path = attach.ring_capture;
  const char* debuginfod = getenv("LOUPE_DEBUGINFOD_URLS");
  symbols::ConfigureDebuginfod(debuginfod != nullptr ? debuginfod : "");
  auto log = spdlog::stderr_color_mt("tracectl");
  log->set_level(attach.quiet ? spdlog::level::warn : spdlog::level::info);
  fmt::print(stderr,
             "tracectl: no louped answering on {}; tracing in this process "
             "(embedded mode)\n",
             attach.socket);
  absl::StatusOr<std::unique_ptr<session::Session>> session =
      session::Session::Start(*std::move(options), log);
  if (!session.ok()) return Fail(session.status());
  const session::SessionStats started = (*session)->stats();
  PrintProbes(started.probe_sites, {});  // the session logged its warnings

  const bool live = !attach.quiet && isatty(STDERR_FILENO);
  const sigset_t stop = StopSignals();
  uint64_t previous = 0;
  while (true) {
    timespec second{1, 0};
    const int signal = sigtimedwait(&stop, nullptr, &second);
    if (signal == SIGINT || signal == SIGTERM) break;
    if ((*session)->WaitFinished(0)) break;
    if (live) {
      const session::SessionStats stats = (*session)->stats();
      PrintProgress(stats.events, stats.events - previous, TotalLost(stats.losses),
                    stats.bytes_written);
      previous = stats.events;
    }
  }
  if (live) fmt::print(stderr, "\n");
  const absl::Status stopped = (*session)->Stop();
  const session::SessionStats stats = (*session)->stats();
  return PrintOutcome({stats.directory, stats.id, stats.segments, stats.events,
                       stats.bytes_written, stats.losses,
                       stopped.ok() ? "" : std::string(MessageOf(stopped)), stats.warnings});
}

}  // namespace

int RunAttach(const AttachOptions& attach) {
  absl::StatusOr<v1::AttachRequest> request = ToAttachRequest(attach);
  if (!request.ok()) return Fail(request.status());
  // Ctrl-C and SIGTERM end the session cleanly: they are waited for, not handled.
  const sigset_t stop = StopSignals();
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  absl::StatusOr<std::unique_ptr<DaemonClient>> daemon = DaemonClient::Connect(attach.socket);
  if (!daemon.ok()) return Fail(daemon.status());
  if (*daemon != nullptr) {
    if (!attach.ring_capture.empty()) {
      // louped would write the file with its own rights, not the caller's.
      return Fail(absl::FailedPreconditionError(fmt::format(
          "--ring-capture is for embedded mode only, and louped answers on {}", attach.socket)));
    }
    return AttachThroughDaemon(**daemon, attach, *std::move(request));
  }
  return AttachEmbedded(attach, *std::move(request));
}

}  // namespace loupe::tracectl
