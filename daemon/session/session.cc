#include "daemon/session/session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "absl/hash/hash.h"

#include "daemon/base/proc_root.h"
#include "daemon/base/status_util.h"
#include "daemon/session/bpf_record_decoder.h"
#include "shared/records.h"

namespace loupe::session {
namespace {

using format::LossReason;
using format::LossSource;

uint64_t MonotonicNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// Where each BPF counter lands in the trace.
struct CounterMeaning {
  uint32_t counter;
  LossSource source;
  LossReason reason;
};
constexpr CounterMeaning kCounterMeanings[] = {
    {LOUPE_CNT_RING_FULL_SCHED, LossSource::kSched, LossReason::kRingFull},
    {LOUPE_CNT_RING_FULL_CPU, LossSource::kCpuSample, LossReason::kRingFull},
    {LOUPE_CNT_STACK_TRUNCATED_SCHED, LossSource::kSched, LossReason::kStackTruncated},
    {LOUPE_CNT_STACK_TRUNCATED_CPU, LossSource::kCpuSample, LossReason::kStackTruncated},
    {LOUPE_CNT_TARGETS_FULL, LossSource::kSched, LossReason::kCapReached},
    {LOUPE_CNT_RING_FULL_SHIM, LossSource::kShim, LossReason::kRingFull},
    {LOUPE_CNT_RING_FULL_USDT, LossSource::kUsdt, LossReason::kRingFull},
    {LOUPE_CNT_RING_FULL_UPROBE, LossSource::kUprobe, LossReason::kRingFull},
};

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

Session::Session(SessionOptions options, std::shared_ptr<spdlog::logger> log)
    : options_(std::move(options)),
      log_(std::move(log)),
      probe_decoder_(&plan_.probe_names, options_.content_policy),
      reorder_(options_.reorder_window_ns, options_.max_pending_events),
      offcpu_([this](uint32_t tgid) { return IsTarget(tgid); }),
      foreign_([this](uint32_t tgid) { return IsTarget(tgid); }) {}

Session::~Session() { Stop().IgnoreError(); }

absl::Status Session::ResolveTargets() {
  for (uint32_t named : options_.pids) {
    uint32_t pid = named;
    if (options_.caller_pid != 0) {
      absl::StatusOr<uint32_t> global = GlobalPid(options_.caller_pid, named);
      if (!global.ok()) return global.status();
      pid = *global;
    }
    absl::StatusOr<ProcessIdentity> process = ReadProcess(pid);
    if (!process.ok()) return process.status();
    if (process->kernel_thread || pid == 0) {
      return absl::InvalidArgumentError(fmt::format(
          "pid {} ({}) is a kernel thread: it has no user space to trace", named, process->name));
    }
    if (options_.caller_uid != 0 && process->uid != options_.caller_uid) {
      return absl::PermissionDeniedError(fmt::format(
          "pid {} belongs to uid {}; a caller that is not root (uid {}) may trace only its own "
          "processes",
          named, process->uid, options_.caller_uid));
    }
    processes_[pid] = *std::move(process);
  }
  return absl::OkStatus();
}

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
  if (sources_) {
    for (const auto& [key, value] : sources_->features()) {
      (*header.mutable_kernel_features())[key] = value;
    }
  }
  return header;
}

// Every segment starts with who is being traced, so it reads alone.
void Session::WritePreamble(format::SegmentWriter& writer) {
  for (const auto& [pid, process] : processes_) {
    writer.AppendPreamble({.tid = pid,
                           .payload = format::ProcessInfo{.ppid = process.ppid,
                                                          .ns_pid = process.ns_pid,
                                                          .uid = process.uid,
                                                          .start_time = process.start_time,
                                                          .name = process.name,
                                                          .exe = process.exe}});
    for (const auto& [tid, thread] : process.threads) {
      writer.AppendPreamble(
          {.tid = tid, .payload = format::ThreadInfo{pid, thread.ns_tid, thread.name}});
    }
  }
  for (OwnedEvent& info : foreign_.StartSegment()) writer.AppendPreamble(info.View());
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
  if (absl::Status status = session->ResolveTargets(); !status.ok()) return status;

  std::vector<uint32_t> tgids;
  for (const auto& [pid, process] : session->processes_) tgids.push_back(pid);
  Session* self = session.get();
  session->plan_ =
      probes::PlanProbes(tgids, session->options_.probes, session->options_.sources.shim,
                         session->options_.sources.follow_children);
  absl::StatusOr<std::unique_ptr<bpf::Sources>> sources = bpf::Sources::Start(
      session->options_.sources, tgids,
      [self](std::span<const uint8_t> bytes) { self->OnRecord(bytes); }, session->plan_);
  if (!sources.ok()) return sources.status();
  session->sources_ = *std::move(sources);
  std::vector<std::string>& warnings = session->stats_.warnings;
  warnings = session->plan_.warnings;
  warnings.insert(warnings.end(), session->sources_->warnings().begin(),
                  session->sources_->warnings().end());
  for (const std::string& entry : session->plan_.slow_entries) {
    warnings.push_back(fmt::format(
        "uprobe at {}: its first instruction is neither push %rbp nor a nop, so the kernel "
        "single-steps it on every call (several times slower)",
        entry));
  }
  for (const std::string& warning : warnings) session->log_->warn("{}", warning);
  session->stats_.probe_sites = static_cast<uint32_t>(session->sources_->probe_sites());

  // Targets may have started threads or exited between reading /proc and
  // attaching; read them again now that nothing can be missed.
  for (auto it = session->processes_.begin(); it != session->processes_.end();) {
    absl::StatusOr<ProcessIdentity> fresh = ReadProcess(it->first);
    if (fresh.ok() && fresh->start_time == it->second.start_time) {
      it->second = *std::move(fresh);
      ++it;
    } else {
      it = session->processes_.erase(it);
    }
  }
  if (session->processes_.empty()) {
    return absl::NotFoundError("every target exited before tracing started");
  }

  format::SegmentWriter::SymbolHook symbol_hook;
  if (session->options_.symbolize) {
    session->symbolizer_ = std::make_unique<symbols::Symbolizer>();
    for (const auto& [pid, process] : session->processes_) {
      session->address_spaces_.Snapshot(pid, MonotonicNow());
    }
    symbol_hook = [self] { return self->SealSymbols(); };
  }
  absl::StatusOr<std::unique_ptr<format::SegmentWriter>> writer = format::SegmentWriter::Create(
      session->options_.writer, session->Header(),
      [self](format::SegmentWriter& w) { self->WritePreamble(w); }, std::move(symbol_hook));
  if (!writer.ok()) return writer.status();
  session->writer_ = *std::move(writer);

  session->start_ns_ = MonotonicNow();
  session->stats_.id = session->options_.writer.session_id;
  session->stats_.directory = session->options_.writer.directory;
  session->stats_.running = true;
  session->log_->info("session {}: tracing pids {} into {} (sched tracepoints: {})",
                      session->stats_.id, fmt::join(tgids, ","), session->stats_.directory,
                      session->sources_->features().at("sched_tracepoints"));
  session->thread_ = std::thread([self] { self->Run(); });
  return session;
}

void Session::OnRecord(std::span<const uint8_t> bytes) {
  drained_bytes_ += bytes.size();
  uint16_t type = 0;
  if (bytes.size() >= sizeof type) std::memcpy(&type, bytes.data(), sizeof type);
  std::optional<OwnedEvent> event = ProbeRecordDecoder::Handles(type)
                                        ? probe_decoder_.Decode(bytes)
                                        : DecodeBpfRecord(bytes);
  if (!event) {
    ++malformed_;  // a bug on one side of records.h; reported as a loss
    return;
  }
  // Names are read from the application now, while it surely runs; a child
  // that has already exited is read through its parent.
  if (const auto* fork = std::get_if<format::ProcessFork>(&event->record.payload)) {
    probe_decoder_.names().OnFork(event->prev_tgid, fork->child_pid);
  } else if (const auto* exec = std::get_if<format::ProcessExec>(&event->record.payload)) {
    probe_decoder_.names().OnExec(exec->pid);
  }
  reorder_.Add(*std::move(event));
}

void Session::Run() {
  while (true) {
    drained_bytes_ = 0;
    const bool stopping = stop_requested_.load();
    bool ended = stopping || processes_.empty() ||
                 (options_.duration_ns != 0 && MonotonicNow() - start_ns_ >= options_.duration_ns);
    if (ended) {
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
  // The last segment's symbols: nothing is drained any more, so waiting costs no events.
  if (symbolizer_ && !symbolizer_->WaitIdle(30'000'000'000)) {
    log_->warn("session {}: symbolization did not finish in 30 s; the last segment keeps raw "
               "addresses for some frames",
               stats_.id);
  }
  absl::Status closed = writer_->Close();
  PublishStats();
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

void Session::Cycle(bool final) {
  if (final) sources_->Detach();  // nothing new after this; drain what is there
  // Every event stamped before this moment is in the ring now (bar records
  // still being filled in): the window is measured from here, not from
  // whenever this thread gets to run after draining.
  const uint64_t drained_at = MonotonicNow();
  if (absl::StatusOr<size_t> drained = sources_->Drain(); !drained.ok()) {
    log_->error("session {}: {}", stats_.id, MessageOf(drained.status()));
  }
  auto sink = [this](OwnedEvent& event) { Release(event); };
  if (final) {
    reorder_.Flush(sink);
  } else {
    reorder_.Release(drained_at, sink);
  }
  ReportLosses();
  if (absl::Status status = writer_->Tick(MonotonicNow()); !status.ok()) ++write_errors_;
  PublishStats();
}

void Session::ReportLosses() {
  const bpf::BpfCounters now = sources_->ReadCounters();
  for (const CounterMeaning& meaning : kCounterMeanings) {
    Loss(meaning.source, meaning.reason, now[meaning.counter] - reported_[meaning.counter]);
  }
  reported_ = now;
  Loss(LossSource::kMerge, LossReason::kLate, reorder_.late() - reported_late_);
  reported_late_ = reorder_.late();
  Loss(LossSource::kMerge, LossReason::kMalformed, malformed_ - reported_malformed_);
  reported_malformed_ = malformed_;
  const ProbeLosses& probe = probe_decoder_.losses();
  ProbeLosses& reported = reported_probe_losses_;
  Loss(LossSource::kShim, LossReason::kStringTruncated,
       probe.shim_strings_cut - reported.shim_strings_cut);
  Loss(LossSource::kUsdt, LossReason::kStringTruncated,
       probe.usdt_strings_cut - reported.usdt_strings_cut);
  Loss(LossSource::kShim, LossReason::kMalformed, probe.shim_unreadable - reported.shim_unreadable);
  Loss(LossSource::kUsdt, LossReason::kMalformed, probe.usdt_unreadable - reported.usdt_unreadable);
  reported = probe;
}

void Session::Loss(LossSource source, LossReason reason, uint64_t count) {
  if (count == 0) return;
  OwnedEvent event;
  event.record = {.time_ns = last_time_ns_ != 0 ? last_time_ns_ : MonotonicNow(),
                  .payload = format::Loss{source, reason, count}};
  Write(event);
  log_->warn("session {}: lost {} {} events ({})", stats_.id, count, format::LossSourceName(source),
             format::LossReasonName(reason));
}

void Session::Release(OwnedEvent& event) {
  for (OwnedEvent& info : foreign_.Describe(event)) Write(info);
  std::optional<OwnedEvent> interval = offcpu_.Observe(event);
  Track(event);
  operations_.Observe(event.record);
  calls_.Observe(event.record);
  Write(event);
  if (interval) {
    operations_.Observe(interval->record);
    Write(*interval);
  }
}

// Keeps the table of live targets (and so the preamble) current.
void Session::Track(OwnedEvent& event) {
  format::Record& record = event.record;
  if (const auto* fork = std::get_if<format::ProcessFork>(&record.payload)) {
    if (fork->child_pid == event.prev_tgid) {  // a new thread
      auto process = processes_.find(event.prev_tgid);
      if (process != processes_.end()) {
        ThreadIdentity thread{.tid = fork->child_tid, .ns_tid = fork->child_tid};
        if (auto parent = process->second.threads.find(record.tid);
            parent != process->second.threads.end()) {
          thread.name = parent->second.name;
        }
        if (absl::StatusOr<ThreadIdentity> read = ReadThread(fork->child_pid, fork->child_tid);
            read.ok()) {
          thread = *std::move(read);
        }
        process->second.threads[thread.tid] = thread;
      }
    } else if (options_.sources.follow_children && IsTarget(event.prev_tgid) &&
               !processes_.contains(fork->child_pid)) {
      // A child BPF follows too (it may be gone from BPF's map by now).
      if (symbolizer_) address_spaces_.Snapshot(fork->child_pid, record.time_ns);
      if (absl::StatusOr<ProcessIdentity> child = ReadProcess(fork->child_pid); child.ok()) {
        processes_[fork->child_pid] = *std::move(child);
      } else {
        ProcessIdentity known{
            .pid = fork->child_pid, .ns_pid = fork->child_pid, .ppid = event.prev_tgid};
        known.threads[fork->child_tid] = {.tid = fork->child_tid, .ns_tid = fork->child_tid};
        processes_[fork->child_pid] = std::move(known);
      }
    }
  } else if (const auto* exit = std::get_if<format::ThreadExit>(&record.payload)) {
    auto process = processes_.find(exit->pid);
    if (process != processes_.end()) {
      process->second.threads.erase(record.tid);
      if (exit->group_dead) {
        log_->info("session {}: target {} ({}) exited with {}", stats_.id, exit->pid,
                   process->second.name, exit->exit_code);
        processes_.erase(process);
      }
    }
  } else if (auto* thread = std::get_if<format::ThreadInfo>(&record.payload)) {
    auto process = processes_.find(thread->pid);
    if (process != processes_.end()) {
      ThreadIdentity& known = process->second.threads[record.tid];
      known.tid = record.tid;
      known.name = event.text;
      thread->ns_tid = known.ns_tid != 0 ? known.ns_tid : record.tid;
    }
  } else if (const auto* exec = std::get_if<format::ProcessExec>(&record.payload)) {
    if (absl::StatusOr<ProcessIdentity> fresh = ReadProcess(exec->pid); fresh.ok()) {
      processes_[exec->pid] = *std::move(fresh);
    }
    if (symbolizer_) address_spaces_.Snapshot(exec->pid, record.time_ns);
  }
}

void Session::Write(OwnedEvent& event) {
  const format::Record& record = event.View();
  last_time_ns_ = std::max(last_time_ns_, record.time_ns);
  if (absl::Status status = writer_->Append(record); !status.ok()) {
    if (write_errors_++ % 1000 == 0) {  // rate-limited: the writer counts every loss
      log_->error("session {}: {}", stats_.id, MessageOf(status));
    }
  }
  CollectAddresses(event);  // after Append: a seal it caused took the previous segment's
  ++written_;
  ++written_by_kind_[static_cast<int>(record.kind())];
  if (const auto* loss = std::get_if<format::Loss>(&record.payload)) {  // rare
    losses_[fmt::format("{}/{}", format::LossSourceName(loss->source),
                        format::LossReasonName(loss->reason))] += loss->count;
  }
}

// Each distinct stack of a segment once: its user frames located in the
// process's mappings (and handed to the symbolizer thread), its kernel frames.
void Session::CollectAddresses(const OwnedEvent& event) {
  if (!symbolizer_ || event.frames.empty()) return;
  const format::Payload& payload = event.record.payload;
  if (!std::holds_alternative<format::CpuSample>(payload) &&
      !std::holds_alternative<format::OffCpu>(payload)) {
    return;
  }
  const uint32_t pid = event.prev_tgid;
  if (!seen_stacks_.insert(absl::HashOf(pid, absl::MakeConstSpan(event.frames))).second) return;
  for (size_t i = 0; i < event.frames.size(); ++i) {
    const uint64_t address = event.frames[i];
    if (i >= event.user_depth) {
      segment_symbols_.AddKernel(address);
      continue;
    }
    // A caller's frame is a return address: the call is the instruction
    // before it, and symbolizing the return address itself can name the
    // line (or an inlined function) after the call instead.
    const uint64_t call_site = i == 0 ? address : address - 1;
    symbols::Location location = address_spaces_.Locate(pid, call_site, event.record.time_ns);
    if (location.object != nullptr) symbolizer_->Prefetch(location.object, location.file_offset);
    segment_symbols_.AddUser(pid, address, std::move(location));
  }
}

v1::SymbolTable Session::SealSymbols() {
  v1::SymbolTable table = segment_symbols_.Build(*symbolizer_);
  segment_symbols_.Clear();
  seen_stacks_.clear();
  return table;
}

// Per cycle, not per event: readers of stats() never slow the event path.
void Session::PublishStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.targets.clear();
  for (const auto& [pid, process] : processes_) stats_.targets.push_back(pid);
  stats_.events = written_;
  for (int kind = 1; kind <= format::kMaxRecordKind; ++kind) {
    if (written_by_kind_[kind] != 0) {
      stats_.events_by_kind[std::string(format::KindName(static_cast<format::RecordKind>(kind)))] =
          written_by_kind_[kind];
    }
  }
  stats_.losses = losses_;
  stats_.bytes_written = writer_->stats().bytes_written;
  stats_.segments = writer_->stats().segments_sealed;
}

absl::Status Session::Stop() {
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
