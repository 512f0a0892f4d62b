#include "daemon/session/pipeline.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <future>

#include "daemon/base/monotonic_clock.h"
#include "daemon/base/read_file.h"
#include "daemon/base/status_util.h"
#include "daemon/format/loss_tally.h"
#include "daemon/session/bpf_record_decoder.h"

namespace loupe::session {

Pipeline::Pipeline(PipelineOptions options, Targets targets,
                   const std::vector<std::string>* probe_names,
                   std::shared_ptr<spdlog::logger> log)
    : options_(std::move(options)),
      log_(std::move(log)),
      targets_(std::move(targets)),
      probe_decoder_(probe_names, options_.content_policy),
      reorder_(options_.reorder_window_ns, options_.max_pending_events),
      offcpu_([this](uint32_t tgid) { return IsTarget(tgid); }),
      missed_([this](uint32_t tgid) { return IsTargetOnArrival(tgid); }),
      missed_wakeups_([this](uint32_t tgid) { return IsTargetOnArrival(tgid); }),
      foreign_([this](uint32_t tgid) { return IsOrWasTarget(tgid); }) {
  if (probe_names != nullptr && !options_.returning_probes.empty()) {
    absl::flat_hash_set<const char*> returning;
    for (size_t id = 0; id < probe_names->size() && id < options_.returning_probes.size(); ++id) {
      if (options_.returning_probes[id]) returning.insert((*probe_names)[id].data());
    }
    calls_.set_returning(std::move(returning));
  }
}

void Pipeline::RememberExited(uint32_t tgid) {
  if (!exited_targets_.insert(tgid).second) return;
  exited_order_.push_back(tgid);
  if (exited_order_.size() > kExitedTargetsKept) {
    exited_targets_.erase(exited_order_.front());
    exited_order_.pop_front();
  }
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(
    PipelineOptions options, Targets targets, v1::SegmentHeader header,
    const std::vector<std::string>* probe_names, std::shared_ptr<spdlog::logger> log,
    uint64_t now_ns) {
  std::unique_ptr<Pipeline> pipeline(
      new Pipeline(std::move(options), std::move(targets), probe_names, std::move(log)));
  pipeline->created_ns_ = now_ns;
  // First: a thread asleep now may wake at any moment, after which its
  // sleep since the start is no longer the one that can be read.
  if (pipeline->options_.recording_since_ns != 0 && pipeline->options_.read_asleep) {
    pipeline->ReadAsleepAtStart();
  }
  timespec realtime{}, monotonic{};
  clock_gettime(CLOCK_REALTIME, &realtime);
  clock_gettime(CLOCK_MONOTONIC, &monotonic);
  pipeline->realtime_minus_monotonic_ns_ =
      (static_cast<int64_t>(realtime.tv_sec) - monotonic.tv_sec) * 1'000'000'000 +
      (realtime.tv_nsec - monotonic.tv_nsec);
  Pipeline* self = pipeline.get();
  Targets& targets_of = pipeline->targets_;
  targets_of.set_follow_children(pipeline->options_.follow_children);
  targets_of.set_exited([self](const ProcessIdentity& process, int32_t exit_code) {
    self->RememberExited(process.pid);
    self->log_->info("session {}: target {} ({}) exited with {}",
                     self->options_.writer.session_id, process.pid, process.name, exit_code);
  });
  targets_of.set_added([self](const ProcessIdentity& process, uint64_t time_ns) {
    for (const format::Record& record : Describe(process, time_ns)) {
      OwnedEvent event;
      event.record = record;  // its views stay in `process`, which outlives the write
      if (const auto* thread = std::get_if<format::ThreadInfo>(&record.payload)) {
        event.text = thread->name;  // View() points the name at the event's own copy
      }
      self->Write(event);
    }
  });
  format::SegmentWriter::SymbolHook symbol_hook;
  if (pipeline->options_.symbolize) {
    pipeline->stacks_ = std::make_unique<StackSymbols>();
    for (uint32_t pid : targets_of.pids()) pipeline->stacks_->Snapshot(pid, now_ns);
    targets_of.set_address_space_changed(
        [self](uint32_t pid, uint32_t forked_from, uint64_t time_ns) {
          if (forked_from != 0) {
            self->stacks_->Forked(forked_from, pid, time_ns);
          } else {
            self->stacks_->Snapshot(pid, time_ns, /*exec=*/true);
          }
        });
    symbol_hook = [self] { return self->stacks_->Seal(); };
  }
  // Every segment starts with who is being traced, so it reads alone.
  auto preamble = [self](format::SegmentWriter& writer) {
    self->targets_.WritePreamble(writer);
    for (OwnedEvent& info : self->foreign_.StartSegment()) writer.AppendPreamble(info.View());
  };
  absl::StatusOr<std::unique_ptr<format::SegmentWriter>> writer = format::SegmentWriter::Create(
      pipeline->options_.writer, std::move(header), preamble, std::move(symbol_hook));
  if (!writer.ok()) return writer.status();
  pipeline->writer_ = *std::move(writer);
  if (const uint64_t since = pipeline->options_.recording_since_ns; since != 0) {
    // Into the reorder buffer: every record drained later is stamped later.
    pipeline->FillClockSync(since, &pipeline->reorder_.Next());
    pipeline->reorder_.Add();
  }
  return pipeline;
}

void Pipeline::OnRecord(std::span<const uint8_t> bytes) {
  uint16_t type = 0;
  if (bytes.size() >= sizeof type) std::memcpy(&type, bytes.data(), sizeof type);
  // Decoded straight into its place in the reorder buffer.
  OwnedEvent* event = &reorder_.Next();
  const bool decoded = ProbeRecordDecoder::Handles(type) ? probe_decoder_.Decode(bytes, event)
                                                         : DecodeBpfRecord(bytes, event);
  if (!decoded) {
    ++malformed_;  // a bug on one side of records.h; reported as a loss
    return;
  }
  if (event->unwind_stopped) {
    ++(std::holds_alternative<format::CpuSample>(event->record.payload) ? unwind_stopped_cpu_
                                                                        : unwind_stopped_sched_);
  }
  // Names are read from the application now, while it surely runs; a child
  // that has already exited is read through its parent.
  if (const auto* fork = std::get_if<format::ProcessFork>(&event->record.payload)) {
    probe_decoder_.names().OnFork(event->prev_tgid, fork->child_pid);
    if (options_.on_fork && fork->child_pid != event->prev_tgid) {
      options_.on_fork(event->prev_tgid, fork->child_pid);
    }
    if (options_.follow_children && fork->child_pid != event->prev_tgid &&
        IsTargetOnArrival(event->prev_tgid)) {
      forked_on_arrival_.insert(fork->child_pid);
    }
  } else if (const auto* exec = std::get_if<format::ProcessExec>(&event->record.payload)) {
    probe_decoder_.names().OnExec(exec->pid);
    if (options_.on_exec) options_.on_exec(exec->pid, exec->old_tid);
  }
  const bool missed = missed_.Observe(*event);
  const bool unwoken = missed_wakeups_.Observe(
      *event, missed && std::holds_alternative<format::SchedSwitch>(event->record.payload)
                  ? missed_.inferred_time_ns()
                  : 0);
  // A followed child is forgotten after its main thread's last switch (it
  // comes after its exit, and may still place a switch-in).
  if (const auto* change = std::get_if<format::SchedSwitch>(&event->record.payload);
      change != nullptr && (change->prev_state & format::kTaskDead) != 0 &&
      event->record.tid == event->prev_tgid) {
    forked_on_arrival_.erase(event->prev_tgid);
  }
  reorder_.Add();
  // The switch-in the kernel did not report goes in too, where it is still
  // in time order; earlier than what has left, its time stays unaccounted.
  if (missed && missed_.inferred_time_ns() >= reorder_.released_until()) {
    missed_.TakeInferred(&reorder_.Next());
    reorder_.Add();
  }
  // So does a wakeup the kernel did not report (it comes before both).
  if (unwoken && missed_wakeups_.inferred_time_ns() >= reorder_.released_until()) {
    missed_wakeups_.TakeInferred(&reorder_.Next());
    reorder_.Add();
  }
  // A busy drain hands over a whole ring at once (~100 k records of 4
  // MiB): what is due leaves as the drain goes, so the reorder buffer holds
  // a window's worth of events and not a ring's.
  if (++added_since_release_ == kReleaseEvery) {
    added_since_release_ = 0;
    reorder_.Release(/*now_ns=*/0, ReleaseSink());
  }
}

void Pipeline::Cycle(uint64_t drained_at_ns, const bpf::BpfCounters& counters, bool final,
                     uint64_t now_ns) {
  const ReorderBuffer::Sink sink = ReleaseSink();
  added_since_release_ = 0;
  if (final) {
    reorder_.Flush(sink);
    // Threads still waiting when tracing stops (an idle pool's workers):
    // their waits so far, or their switch-out stacks would be in no record.
    const uint64_t end_ns =
        std::max(last_time_ns_, stopped_at_ns_ != 0 ? stopped_at_ns_ : drained_at_ns);
    while (offcpu_.TakeUnended(end_ns, &interval_)) WriteInterval();
    WriteAsleepAllAlong(end_ns);
    if (options_.recording_since_ns != 0) {
      OwnedEvent stop;
      FillClockSync(end_ns, &stop);
      Write(stop);
    }
  } else {
    reorder_.Release(drained_at_ns, sink);
  }
  const LossCounts now{.bpf = counters,
                       .late = reorder_.late(),
                       .malformed = malformed_,
                       .unwind_stopped_sched = unwind_stopped_sched_,
                       .unwind_stopped_cpu = unwind_stopped_cpu_,
                       .probes = probe_decoder_.losses()};
  // A Loss record is stamped with the last event written, so that no older
  // event follows it in the file; before any (the first cycles hold every
  // event in the reorder window), with the oldest time an event still to
  // come can have without being late.
  const uint64_t window = options_.reorder_window_ns;
  const uint64_t stamp = last_time_ns_ != 0 ? last_time_ns_
                         : final             ? now_ns
                         : drained_at_ns > window ? drained_at_ns - window
                                                  : 0;
  for (const format::Loss& loss : losses_.Since(now)) WriteLoss(loss, stamp);
  WarnLosses(now_ns, final);
  if (absl::Status status = writer_->Tick(now_ns); !status.ok()) ++write_errors_;
}

Pipeline::AsleepRead Pipeline::ReadAsleepThreads(uint64_t budget_ns) {
  const uint64_t until = budget_ns != 0 ? MonotonicNs() + budget_ns : UINT64_MAX;
  AsleepRead read;
  for (const auto& [pid, process] : targets_.processes()) {
    for (const auto& [tid, thread] : process.threads) {
      if (offcpu_.Seen(tid)) continue;
      if (MonotonicNs() >= until) return read;
      std::optional<Asleep> asleep = options_.read_asleep(pid, tid);
      if (!asleep) continue;
      // kallsyms (a few MB, 50-75 ms to read) only when there are kernel
      // frames to place (none for a caller who gets no kernel stacks),
      // read beside the threads left.
      if (!asleep->kernel_frames.empty() && !read.kallsyms.valid()) {
        read.kallsyms = std::async(std::launch::async, [] { return ReadWholeFile("/proc/kallsyms"); });
      }
      read.threads.push_back({pid, tid, *std::move(asleep)});
    }
  }
  return read;
}

std::vector<OwnedEvent> Pipeline::StacksOf(AsleepRead& read) {
  std::vector<const Asleep*> asleep;
  for (const AsleepThread& thread : read.threads) asleep.push_back(&thread.asleep);
  absl::StatusOr<std::string> kallsyms =
      read.kallsyms.valid() ? read.kallsyms.get() : absl::StatusOr<std::string>(std::string());
  return AsleepStacks(asleep, kallsyms.ok() ? *kallsyms : std::string_view());
}

void Pipeline::ReadAsleepAtStart() {
  AsleepRead read = ReadAsleepThreads(options_.asleep_read_budget_ns);
  std::vector<OwnedEvent> stacks = StacksOf(read);
  const std::vector<AsleepThread>& found = read.threads;
  for (size_t i = 0; i < found.size(); ++i) {
    offcpu_.AsleepAtStart(found[i].tid, found[i].pid, found[i].asleep.prev_state,
                          options_.recording_since_ns, found[i].asleep.read_ns, stacks[i]);
  }
}

void Pipeline::WriteAsleepAllAlong(uint64_t end_ns) {
  // From the trace's start: its first event, or the pipeline's making
  // (the sources attached just before) when the targets slept till late.
  const uint64_t start_ns =
      first_time_ns_ != 0 ? std::min(first_time_ns_, created_ns_) : created_ns_;
  if (!options_.read_asleep || end_ns <= start_ns) return;
  AsleepRead read = ReadAsleepThreads(/*budget_ns=*/0);
  std::vector<OwnedEvent> stacks = StacksOf(read);
  const std::vector<AsleepThread>& found = read.threads;
  for (size_t i = 0; i < found.size(); ++i) {
    OwnedEvent& event = stacks[i];
    event.record = {.time_ns = end_ns,
                    .tid = found[i].tid,
                    .payload = format::OffCpu{.duration_ns = end_ns - start_ns,
                                              .prev_state = found[i].asleep.prev_state}};
    event.prev_tgid = found[i].pid;
    operations_.Observe(event.record);
    Write(event);
  }
}

void Pipeline::FillClockSync(uint64_t time_ns, OwnedEvent* event) const {
  event->Clear();
  event->record = {.time_ns = time_ns,
                   .payload = format::ClockSync{static_cast<uint64_t>(
                       static_cast<int64_t>(time_ns) + realtime_minus_monotonic_ns_)}};
}

void Pipeline::WarnLosses(uint64_t now_ns, bool final) {
  constexpr uint64_t kEvery = 1'000'000'000;
  if (unwarned_losses_.empty() || (!final && now_ns < warned_at_ns_ + kEvery)) return;
  uint64_t total = 0;
  std::string parts;
  for (const auto& [what, count] : unwarned_losses_) {
    total += count;
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", what, count);
  }
  log_->warn("session {}: lost {} events since the last warning ({})", options_.writer.session_id,
             total, parts);
  unwarned_losses_.clear();
  warned_at_ns_ = now_ns;
}

void Pipeline::WriteLoss(const format::Loss& loss, uint64_t time_ns) {
  OwnedEvent event;
  event.record = {.time_ns = time_ns, .payload = loss};
  Write(event);
  // Cut content (a stack, a string) is summed up at the end; only lost
  // events are worth a warning as they happen.
  if (format::IsCut(loss.reason)) return;
  unwarned_losses_[format::LossKey(loss.source, loss.reason)] += loss.count;
}

void Pipeline::Release(OwnedEvent& event) {
  for (OwnedEvent& info : foreign_.Describe(event)) Write(info);
  const bool ended_interval = offcpu_.Observe(event, &interval_);
  // A wait ended by a record of the thread's own (its switch-in never
  // reported) goes before that record: an operation the record ends held
  // the wait, one it begins did not.
  const bool ended_by_own_record =
      ended_interval && !std::holds_alternative<format::SchedSwitch>(event.record.payload);
  if (ended_by_own_record) WriteInterval();
  targets_.Track(event);
  operations_.Observe(event.record);
  calls_.Observe(event.record, event.user_sp, event.args());
  if (UprobePairer::IsCatch(event.record)) {
    WriteUnwound(event.record);
  } else {
    Write(event);
  }
  if (ended_interval && !ended_by_own_record) WriteInterval();
}

void Pipeline::WriteInterval() {
  operations_.Observe(interval_.record);
  Write(interval_);
}

void Pipeline::WriteUnwound(const format::Record& caught) {
  for (const format::UprobeReturn& ret : calls_.unwound()) {
    unwound_.Clear();
    unwound_.record = {.time_ns = caught.time_ns, .tid = caught.tid, .cpu = caught.cpu, .payload = ret};
    Write(unwound_);
  }
}

void Pipeline::Write(OwnedEvent& event) {
  const format::Record& record = event.View();
  if (first_time_ns_ == 0) first_time_ns_ = record.time_ns;
  last_time_ns_ = std::max(last_time_ns_, record.time_ns);
  if (absl::Status status = writer_->Append(record); !status.ok()) {
    // A line a second at most, by the trace's clock: the writer counts
    // every event it could not write, and a full disk fails them all.
    ++write_errors_;
    if (record.time_ns >= error_logged_at_ns_ + 1'000'000'000 || error_logged_at_ns_ == 0) {
      log_->error("session {}: {} ({} events not written since the last such line)",
                  options_.writer.session_id, MessageOf(status),
                  write_errors_ - write_errors_logged_);
      error_logged_at_ns_ = record.time_ns;
      write_errors_logged_ = write_errors_;
    }
  }
  // After Append: a seal it caused took the previous segment's stacks.
  const bool has_stack = std::holds_alternative<format::CpuSample>(record.payload) ||
                         std::holds_alternative<format::OffCpu>(record.payload);
  if (stacks_ && has_stack) stacks_->Collect(event);
  if (const auto* loss = std::get_if<format::Loss>(&record.payload)) losses_.Count(*loss);
}

absl::Status Pipeline::Close(uint64_t symbol_wait_ns) {
  // The last segment's symbols: nothing is drained any more, so waiting
  // costs no events.
  if (stacks_ && !stacks_->WaitIdle(symbol_wait_ns)) {
    log_->warn("session {}: symbolization did not finish in {} s; the last segment keeps raw "
               "addresses for some frames",
               options_.writer.session_id, symbol_wait_ns / 1'000'000'000);
  }
  return writer_->Close();
}

// The writer's ledger, which is what the files say: the records in them
// (preambles and Loss records too, as verify counts them; those of evicted
// segments no more) and every loss their trailers state, the writer's own
// evictions and failed writes included. Records in the block being built
// are counted too, so the live figure moves; after Close there are none.
PipelineStats Pipeline::stats() const {
  const format::WriterStats written = writer_->stats();
  PipelineStats stats;
  stats.events = written.records_in_files + written.records_pending;
  for (int kind = 1; kind <= format::kMaxRecordKind; ++kind) {
    if (written.records_by_kind[kind] != 0) {
      stats.events_by_kind[std::string(format::KindName(static_cast<format::RecordKind>(kind)))] =
          written.records_by_kind[kind];
    }
  }
  stats.losses = writer_->losses();
  // What is in its files now, as the events and segments are.
  stats.bytes_written = written.bytes_written - written.bytes_evicted;
  stats.segments = written.segments_in_files;
  return stats;
}

}  // namespace loupe::session
