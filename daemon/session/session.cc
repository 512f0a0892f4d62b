#include "daemon/session/session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "daemon/base/monotonic_clock.h"
#include "daemon/base/proc_root.h"
#include "daemon/base/status_util.h"
#include "daemon/session/bpf_record_source.h"
#include "daemon/session/proc.h"

namespace loupe::session {
namespace {

namespace fs = std::filesystem;

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

format::WriterOptions NewSession(format::WriterOptions writer) {
  writer.new_session = true;
  return writer;
}

bool MapsUprobeTrampoline(uint32_t pid) {
  std::ifstream maps(ProcPath(pid, "/maps"));
  for (std::string line; std::getline(maps, line);) {
    if (line.ends_with("[uprobes-trampoline]")) return true;
  }
  return false;
}

}  // namespace

absl::Status ValidateSessionOptions(const SessionOptions& o) {
  if (o.pids.empty()) return absl::InvalidArgumentError("no target pid given");
  if (o.reorder_window_ns < 1'000'000 || o.reorder_window_ns > 10'000'000'000) {
    return absl::InvalidArgumentError(fmt::format(
        "reorder_window_ms = {} is out of range: 1 .. 10000", o.reorder_window_ns / 1'000'000));
  }
  if (o.drain_interval_ns < 1'000'000 || o.drain_interval_ns > 1'000'000'000) {
    return absl::InvalidArgumentError(fmt::format(
        "drain_interval_ms = {} is out of range: 1 .. 1000", o.drain_interval_ns / 1'000'000));
  }
  if (o.max_pending_events < 1024) {
    return absl::InvalidArgumentError(fmt::format(
        "max_pending_events = {} is out of range: at least 1024", o.max_pending_events));
  }
  if (absl::Status status = bpf::ValidateSourceOptions(o.sources); !status.ok()) return status;
  return format::ValidateWriterOptions(o.writer);
}

Session::~Session() { Stop().IgnoreError(); }

v1::SegmentHeader Session::Header() const {
  v1::SegmentHeader header;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  header.set_host(host);
  header.set_boot_id(BootId());
  header.set_writer_version("louped 0.1.0");
  auto& config = *header.mutable_config();
  std::vector<std::string> sources;
  if (options_.sources.sched) sources.push_back("sched");
  if (options_.sources.cpu) sources.push_back("cpu");
  if (options_.sources.shim) sources.push_back("shim");
  config["sources"] = fmt::format("{}", fmt::join(sources, ","));
  config["sample_hz"] = std::to_string(options_.sources.sample_hz);
  config["follow_children"] = options_.sources.follow_children ? "true" : "false";
  // Which stacks carry kernel frames (none for a caller other than root).
  std::vector<std::string> kernel_stacks;
  if (options_.sources.cpu_kernel_stacks) kernel_stacks.push_back("cpu");
  if (options_.sources.offcpu_kernel_stacks) kernel_stacks.push_back("offcpu");
  config["kernel_stacks"] =
      kernel_stacks.empty() ? "none" : fmt::format("{}", fmt::join(kernel_stacks, ","));
  config["targets"] = fmt::format("{}", fmt::join(options_.pids, ","));
  config["ring_buffer_size"] = std::to_string(options_.sources.ring_bytes);
  config["reorder_window_ns"] = std::to_string(options_.reorder_window_ns);
  config["content_policy"] = std::string(ContentPolicyName(options_.content_policy));
  std::vector<std::string> usdt, uprobes;
  for (const auto& request : options_.probes.usdt) usdt.push_back(request.text);
  for (const auto& request : options_.probes.uprobes) uprobes.push_back(request.text);
  if (!usdt.empty()) config["usdt"] = fmt::format("{}", fmt::join(usdt, " "));
  if (!uprobes.empty()) config["uprobes"] = fmt::format("{}", fmt::join(uprobes, " "));
  if (!stats_.warnings.empty()) {
    config["probe_warnings"] = fmt::format("{}", fmt::join(stats_.warnings, "\n"));
  }
  for (const auto& [key, value] : source_->features()) {
    (*header.mutable_kernel_features())[key] = value;
  }
  return header;
}

absl::StatusOr<std::unique_ptr<Session>> Session::Start(SessionOptions options,
                                                        std::shared_ptr<spdlog::logger> log) {
  if (absl::Status status = ValidateSessionOptions(options); !status.ok()) return status;
  if (HostPidsUnreachable()) {
    return absl::FailedPreconditionError(
        "this process runs in a PID namespace of its own, whose /proc does not show the host "
        "pids BPF reports: give it the host's /proc (LOUPE_PROC_ROOT=/host/proc, or louped's "
        "proc_root) or run it in the host's PID namespace");
  }
  std::unique_ptr<Session> session(new Session(std::move(options), std::move(log)));
  Session* self = session.get();
  const SessionOptions& o = session->options_;
  absl::StatusOr<Targets> targets =
      Targets::Resolve(o.pids, o.caller_pid, o.caller_uid, o.sources.follow_children);
  if (!targets.ok()) return targets.status();

  const std::vector<uint32_t> tgids = targets->pids();
  session->plan_ = probes::PlanProbes(tgids, o.probes, o.sources.shim, o.sources.follow_children);
  if (!o.ring_capture_path.empty()) {
    absl::StatusOr<std::unique_ptr<RingCaptureWriter>> capture =
        RingCaptureWriter::Create(o.ring_capture_path);
    if (!capture.ok()) return capture.status();
    session->capture_ = *std::move(capture);
  }
  // Records arrive only while the session thread drains, after the pipeline exists.
  auto handler = [self](std::span<const uint8_t> bytes) {
    self->drained_bytes_ += bytes.size();
    if (self->capture_) self->capture_->Record(bytes);
    self->pipeline_->OnRecord(bytes);
  };
  absl::StatusOr<std::unique_ptr<BpfRecordSource>> source =
      BpfRecordSource::Start(o.sources, tgids, handler, session->plan_);
  if (!source.ok()) return source.status();
  session->source_ = *std::move(source);
  // Tracing starts now: a duration counts from here, not from the loading before.
  session->start_ns_ = MonotonicNs();
  std::vector<std::string>& warnings = session->stats_.warnings;
  warnings = o.notes;
  warnings.insert(warnings.end(), targets->notes().begin(), targets->notes().end());
  warnings.insert(warnings.end(), session->plan_.warnings.begin(), session->plan_.warnings.end());
  warnings.insert(warnings.end(), session->source_->warnings().begin(),
                  session->source_->warnings().end());
  for (const std::string& entry : session->plan_.slow_entries) {
    warnings.push_back(fmt::format(
        "uprobe at {}: its first instruction is neither a push of a register nor a nop, so the kernel "
        "single-steps it on every call (several times slower)",
        entry));
  }
  for (const std::string& warning : warnings) session->log_->warn("{}", warning);
  session->stats_.probe_sites = static_cast<uint32_t>(session->source_->probe_sites());
  session->exec_coverage_ = std::make_unique<ExecCoverage>(
      session->plan_, session->source_->probes_system_wide(), tgids,
      [](uint32_t pid) { return fmt::format("/proc/{}/exe", pid); });

  // Targets may have started threads or exited between reading /proc and
  // attaching; read them again now that nothing can be missed.
  targets->Refresh();
  if (targets->empty()) return absl::NotFoundError("every target exited before tracing started");

  // Only switches traced tell when a thread asleep at the start woke, or
  // that it never ran; its kernel stack only where the caller may have
  // kernel stacks at all.
  PipelineOptions::ReadAsleep read_asleep;
  if (o.sources.sched) {
    read_asleep = [kernel = o.sources.offcpu_kernel_stacks, user = o.sources.offcpu_user_stacks,
                   source = session->source_.get(), caller_uid = o.caller_uid,
                   may_trace = std::map<uint32_t, bool>()](
                      uint32_t pid, uint32_t tid) mutable -> std::optional<Asleep> {
      // Read with louped's rights: only of a process the caller may still
      // trace (one that exec'd a setuid program since is traced no more);
      // asked once per process, as /proc lists all its threads.
      if (caller_uid != 0) {
        auto [known, added] = may_trace.try_emplace(pid, false);
        if (added) {
          absl::StatusOr<ProcessIdentity> process = ReadProcess(pid);
          known->second = process.ok() && CallerMayTrace(caller_uid, *process);
        }
        if (!known->second) return std::nullopt;
      }
      // Its switch-in before this ran from that sleep; one after may have
      // come during the read, which then still read that sleep (a user
      // stack walked across it is dropped).
      const uint64_t read_at = MonotonicNs();
      std::optional<Asleep> asleep = ReadAsleep(pid, tid, kernel);
      if (!asleep) return asleep;
      if (user) {
        if (std::optional<bpf::WalkedStack> stack = source->AsleepUserStack(pid, tid)) {
          SetUserStack(*stack, &*asleep);
        }
      }
      asleep->read_ns = read_at;
      return asleep;
    };
  }
  const std::vector<std::string> target_notes = targets->notes();
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create({.writer = NewSession(o.writer),
                        .content_policy = o.content_policy,
                        .follow_children = o.sources.follow_children,
                        .symbolize = o.symbolize,
                        .reorder_window_ns = o.reorder_window_ns,
                        .max_pending_events = o.max_pending_events,
                        .on_exec = [self](uint32_t pid,
                                          uint32_t old_tid) { self->OnExec(pid, old_tid); },
                        .on_fork = [self](uint32_t parent,
                                          uint32_t child) { self->OnFork(parent, child); },
                        .read_asleep = std::move(read_asleep),
                        .recording_since_ns = session->source_->recording_since_ns(),
                        .returning_probes = session->plan_.probe_returns},
                       *std::move(targets), session->Header(), &session->plan_.probe_names,
                       session->log_, MonotonicNs());
  if (!pipeline.ok()) return pipeline.status();
  session->pipeline_ = *std::move(pipeline);
  // Processes left out, probes asked for and not placed, and stacks walked
  // less well than asked: the trace says so (verify, report), not only the
  // log. Else a mistyped --uprobe reads as a service that served no requests.
  for (const std::string& note : target_notes) session->pipeline_->AddSessionNote(note);
  for (const std::string& warning : session->plan_.warnings) {
    session->pipeline_->AddSessionNote(warning);
  }
  for (const std::string& warning : session->source_->warnings()) {
    session->pipeline_->AddSessionNote(warning);
  }

  session->stats_.id = o.writer.session_id;
  session->stats_.directory = o.writer.directory;
  session->stats_.running = true;
  session->stats_.targets = session->pipeline_->targets().pids();
  session->log_->info("session {}: tracing pids {} into {} (sched tracepoints: {})",
                      session->stats_.id, fmt::join(tgids, ","), session->stats_.directory,
                      session->source_->features().at("sched_tracepoints"));
  session->thread_ = std::thread([self] { self->Run(); });
  return session;
}

void Session::Run() {
  // Loading the BPF objects parsed the kernel's BTF once per object (~5 MiB
  // each), all freed by now: hand those pages back before tracing, or they
  // stay resident for the whole session.
  malloc_trim(0);
  while (true) {
    drained_bytes_ = 0;
    const char* ended_because =
        stop_requested_.load()           ? ""
        : pipeline_->targets().empty()   ? "every target exited"
        : options_.duration_ns != 0 && MonotonicNs() - start_ns_ >= options_.duration_ns
            ? "its duration elapsed"
            : nullptr;
    if (ended_because != nullptr) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stats_.ended_because = ended_because;
      }
      Cycle(/*final=*/true);
      break;
    }
    Cycle(/*final=*/false);
    // Adaptive: a ring filling up is drained again soon.
    const bool busy = drained_bytes_ > options_.sources.ring_bytes / 4;
    const uint64_t sleep_ns = busy ? 1'000'000 : options_.drain_interval_ns;
    timespec ts{static_cast<time_t>(sleep_ns / 1'000'000'000),
                static_cast<long>(sleep_ns % 1'000'000'000)};
    nanosleep(&ts, nullptr);
  }
  // Nothing more comes from the kernel: its programs, maps, ring and
  // perf events go now, not when the session object is dropped.
  source_.reset();
  capture_.reset();
  absl::Status closed = pipeline_->Close(SymbolWaitNs());
  PublishStats();
  pipeline_.reset();  // the writer, the symbolizer thread, pending events
  // What the session's threads freed sits in malloc's per-thread arenas;
  // hand it back, or a daemon that runs many sessions keeps their peak.
  malloc_trim(0);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!closed.ok()) {
    stats_.last_error = std::string(MessageOf(closed));
    final_status_ = closed;
  }
  stats_.running = false;
  finished_ = true;
  finished_changed_.notify_all();
  log_->info("session {}: ended, {} events in {} segment(s)", stats_.id, stats_.events,
             stats_.segments);
}

// Kernels from 6.18 turn a uprobe on a 5-byte nop into a call to a page of
// their own ([uprobes-trampoline]); a child forked after that inherits the
// call in its code but, on some (6.18.44 here), not the page: it dies of
// SIGSEGV at its first probe, also after the session. Said once per
// session, of the first child seen without the page its parent has.
void Session::OnFork(uint32_t parent, uint32_t child) {
  if (fork_warned_ || !MapsUprobeTrampoline(parent)) return;
  // Still there (not yet reaped), running the same program: it can tell.
  std::error_code error;
  const fs::path parent_exe = fs::read_symlink(ProcPath(parent, "/exe"), error);
  const fs::path child_exe = fs::read_symlink(ProcPath(child, "/exe"), error);
  const bool known = !error && child_exe == parent_exe;
  if (known && MapsUprobeTrampoline(child)) return;
  fork_warned_ = true;
  const std::string what =
      known ? "lacks that page: it is killed (SIGSEGV) at its first probe, also after this session"
            : "was gone before louped could look: where the kernel does not copy that page to a "
              "child, the child is killed (SIGSEGV) at its first probe, also after this session";
  const std::string warning = fmt::format(
      "pid {}, forked from traced pid {} after the kernel turned probe sites there into calls to "
      "its [uprobes-trampoline] page, {} (a kernel bug with uprobes on 5-byte nops, seen on "
      "6.18); build the program with LOUPE_SHIM_TRAP_PROBES if it forks workers while traced "
      "(docs/shim.md)",
      child, parent, what);
  log_->warn("session {}: {}", stats_.id, warning);
  pipeline_->AddNote(warning);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.warnings.push_back(warning);
}

void Session::OnExec(uint32_t pid, uint32_t old_tid) {
  std::optional<std::string> warning = exec_coverage_->OnExec(pid, old_tid);
  if (options_.caller_uid != 0) {
    // The sched program dropped it already if it now has more rights than
    // its user (sched.bpf.c); this says why its events stop.
    absl::StatusOr<ProcessIdentity> process = ReadProcess(pid);
    if (process.ok() && !CallerMayTrace(options_.caller_uid, *process)) {
      warning = fmt::format(
          "pid {} exec'd {}, which runs with rights its user does not have (setuid, setgid or "
          "file capabilities): not traced from here on, for a caller that is not root (uid {})",
          pid, process->exe, options_.caller_uid);
    }
  }
  if (!warning) return;
  log_->warn("session {}: {}", stats_.id, *warning);
  pipeline_->AddNote(*warning);  // in the trace, which outlives the log
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.warnings.push_back(*std::move(warning));
}

void Session::Cycle(bool final) {
  if (final) {
    // Waits still open end here, not once the detach is done (unregistering
    // uprobes can take seconds, during which nothing is known of them).
    pipeline_->TracingStops(MonotonicNs());
    source_->Detach();  // nothing new after this; drain what is there
  }
  // Every event stamped before this moment is in the ring now (bar records
  // still being filled in): the window is measured from here, not from
  // whenever this thread gets to run after draining.
  const uint64_t drained_at = MonotonicNs();
  if (absl::StatusOr<size_t> drained = source_->Drain(); !drained.ok()) {
    log_->error("session {}: {}", stats_.id, MessageOf(drained.status()));
  }
  const bpf::BpfCounters counters = source_->ReadCounters();
  if (capture_) {
    if (absl::Status status = capture_->EndBatch(counters); !status.ok()) {
      log_->error("session {}: {}; capture stopped", stats_.id, MessageOf(status));
      capture_.reset();
    }
  }
  pipeline_->Cycle(drained_at, counters, final, MonotonicNs());
  std::vector<std::string> late = source_->TakeLateWarnings();
  for (const std::string& warning : late) log_->warn("session {}: {}", stats_.id, warning);
  if (!late.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.warnings.insert(stats_.warnings.end(), late.begin(), late.end());
  }
  PublishStats();
}

// Per cycle, not per event: readers of stats() never slow the event path.
void Session::PublishStats() {
  PipelineStats now = pipeline_->stats();
  std::vector<uint32_t> targets = pipeline_->targets().pids();
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.targets = std::move(targets);
  stats_.events = now.events;
  stats_.events_by_kind = std::move(now.events_by_kind);
  stats_.losses = std::move(now.losses);
  stats_.bytes_written = now.bytes_written;
  stats_.segments = now.segments;
}

uint64_t Session::SymbolWaitNs() const {
  const int64_t deadline = symbol_deadline_ns_.load();
  if (deadline == INT64_MAX) return options_.symbol_wait_ns;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  const uint64_t left = deadline > now ? static_cast<uint64_t>(deadline - now) : 0;
  if (left < options_.symbol_wait_ns) {
    log_->info("session {}: waiting {} ms at most for the last symbols (shutdown deadline)",
               options_.writer.session_id, left / 1'000'000);
  }
  return std::min(left, options_.symbol_wait_ns);
}

void Session::Hurry(Deadline symbol_deadline) {
  if (symbol_deadline == Deadline::max()) return;
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         symbol_deadline.time_since_epoch())
                         .count();
  int64_t current = symbol_deadline_ns_.load();
  while (ns < current && !symbol_deadline_ns_.compare_exchange_weak(current, ns)) {
  }
}

absl::Status Session::Stop(Deadline symbol_deadline) {
  Hurry(symbol_deadline);
  stop_requested_ = true;
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  return final_status_;
}

bool Session::WaitFinished(uint64_t timeout_ns) {
  std::unique_lock<std::mutex> lock(mutex_);
  return finished_changed_.wait_for(lock, std::chrono::nanoseconds(timeout_ns),
                                    [this] { return finished_; });
}

SessionStats Session::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace loupe::session
