// What a session does with its records, whatever their source: decode,
// put in time order, derive off-CPU intervals, describe the other side of
// switches, follow targets, count losses, and write segments with their
// symbols. It has no clock and no thread of its own: the caller drains a
// RecordSource into OnRecord and calls Cycle with the times, so a replay
// drives it exactly as the kernel's ring does.
#ifndef LOUPE_DAEMON_SESSION_PIPELINE_H_
#define LOUPE_DAEMON_SESSION_PIPELINE_H_

#include <spdlog/logger.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "daemon/format/segment_writer.h"
#include "daemon/session/asleep_all_along.h"
#include "daemon/session/content_policy.h"
#include "daemon/session/foreign_threads.h"
#include "daemon/session/loss_ledger.h"
#include "daemon/session/missed_switch_ins.h"
#include "daemon/session/missed_wakeups.h"
#include "daemon/session/offcpu_tracker.h"
#include "daemon/session/operation_tracker.h"
#include "daemon/session/probe_record_decoder.h"
#include "daemon/session/reorder_buffer.h"
#include "daemon/session/stack_symbols.h"
#include "daemon/session/targets.h"
#include "daemon/session/uprobe_pairer.h"

namespace loupe::session {

struct PipelineOptions {
  format::WriterOptions writer;  // directory, session id, rotation, retention
  ContentPolicy content_policy = ContentPolicy::kNames;
  bool follow_children = false;
  bool symbolize = true;  // a symbol table in every sealed segment
  uint64_t reorder_window_ns = 50'000'000;
  size_t max_pending_events = 1 << 20;
  // A target called exec (its pid, the thread that called it, 0 unknown):
  // told on the draining thread, while the process surely still runs.
  std::function<void(uint32_t pid, uint32_t old_tid)> on_exec;
  // A target forked a new process (not a thread): told on the draining
  // thread, soon after.
  std::function<void(uint32_t parent_pid, uint32_t child_pid)> on_fork;
  // How a target thread sleeps now (ReadAsleep): for every one right after
  // recording began (recording_since_ns), whose stacks its first switch-in
  // ends, and for those that never switched while traced, when tracing
  // stops. Unset: not asked (a replay).
  using ReadAsleep = std::function<std::optional<Asleep>(uint32_t pid, uint32_t tid)>;
  ReadAsleep read_asleep;
  // How long the read when recording began may take at most (~0.3-0.6 ms
  // a thread here with user stacks): the ring is not drained meanwhile.
  // Threads left unread keep no stack for a sleep that ends while traced;
  // those asleep all along are read when tracing stops.
  uint64_t asleep_read_budget_ns = 50'000'000;
  // When the sources began recording (RecordSource::recording_since_ns), 0
  // unknown. The trace then opens and closes with a clock_sync record at
  // its start and stop, which bound the time it holds: a thread's state
  // from the start to its first switch is known, and a quiet target's
  // trace still lasts as long as it was traced.
  uint64_t recording_since_ns = 0;
  // By probe id (probes::ProbePlan::probe_returns): the probes whose
  // returns are probed, whose calls are paired (and ended by a catch).
  // Empty: every uprobe's.
  std::vector<bool> returning_probes;
};

// The writer's ledger, read between cycles: what the files hold, as
// `tracectl verify` reads them once the session is closed.
struct PipelineStats {
  uint64_t events = 0;  // records in the files (and the block being built)
  std::map<std::string, uint64_t> events_by_kind;
  std::map<std::string, uint64_t> losses;  // "source/reason" -> count, as the trailers state
  uint64_t bytes_written = 0;
  uint64_t segments = 0;  // sealed and still in the folder
};

class Pipeline {
 public:
  // `probe_names` (by probe id) must outlive the pipeline. Opens the first
  // segment, so a bad directory fails here.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(
      PipelineOptions options, Targets targets, v1::SegmentHeader header,
      const std::vector<std::string>* probe_names, std::shared_ptr<spdlog::logger> log,
      uint64_t now_ns);

  // A sentence for the trace: the trailer of the segment open now.
  void AddNote(std::string note) { writer_->AddNote(std::move(note)); }
  // One for every segment's trailer: true of the whole session.
  void AddSessionNote(std::string note) { writer_->AddSessionNote(std::move(note)); }
  // The record handler for a RecordSource.
  void OnRecord(std::span<const uint8_t> bytes);
  // After draining the source at `drained_at_ns` (its counters then):
  // writes every event older than the reorder window, or all of them when
  // `final`, then what was lost meanwhile.
  void Cycle(uint64_t drained_at_ns, const bpf::BpfCounters& counters, bool final,
             uint64_t now_ns);
  // The time tracing stops (before the sources detach): the end of the
  // waits still open then. Without it the final cycle's drain time is.
  void TracingStops(uint64_t at_ns) { stopped_at_ns_ = at_ns; }
  // Seals the last segment, waiting up to `symbol_wait_ns` for its symbols.
  absl::Status Close(uint64_t symbol_wait_ns);

  const Targets& targets() const { return targets_; }
  size_t pending_events() const { return reorder_.size(); }
  PipelineStats stats() const;

 private:
  Pipeline(PipelineOptions options, Targets targets, const std::vector<std::string>* probe_names,
           std::shared_ptr<spdlog::logger> log);
  void Release(OwnedEvent& event);
  // The off-CPU interval the tracker made (interval_), stamped with its operation.
  void WriteInterval();
  // The reorder buffer's sink: Release.
  ReorderBuffer::Sink ReleaseSink() {
    return [this](OwnedEvent& event) { Release(event); };
  }
  void Write(OwnedEvent& event);
  // In place of an exception's catch: the returns of the calls it unwound.
  void WriteUnwound(const format::Record& caught);
  // Target threads not seen switching or running that sleep now.
  struct AsleepThread {
    uint32_t pid, tid;
    Asleep asleep;
  };
  // With kallsyms being read, where any has kernel frames to place.
  struct AsleepRead {
    std::vector<AsleepThread> threads;
    std::future<absl::StatusOr<std::string>> kallsyms;
  };
  // Stops once `budget_ns` has passed (0: reads them all).
  AsleepRead ReadAsleepThreads(uint64_t budget_ns);
  // Their stacks as off_cpu records carry them (AsleepStacks).
  static std::vector<OwnedEvent> StacksOf(AsleepRead& read);
  // Right after recording began: the sleeps its first switch-ins end.
  void ReadAsleepAtStart();
  // When tracing stops at `end_ns`: a wait from the first event on for each
  // target thread that never switched and sleeps now.
  void WriteAsleepAllAlong(uint64_t end_ns);
  void WriteLoss(const format::Loss& loss, uint64_t time_ns);
  // Makes `event` a clock_sync record at `time_ns`: the trace's first event or its last.
  void FillClockSync(uint64_t time_ns, OwnedEvent* event) const;
  // One warning line a second at most for the events lost meanwhile (a
  // full ring loses some at every drain: a line each flooded the log).
  void WarnLosses(uint64_t now_ns, bool final);
  bool IsTarget(uint32_t tgid) const { return targets_.contains(tgid); }
  // A target, or one that exited lately: its threads' last switches and
  // the wakeups they make on the way out (a joined thread's) come after
  // its exit and are still its own, not a foreign process's.
  bool IsOrWasTarget(uint32_t tgid) const {
    return IsTarget(tgid) || exited_targets_.contains(tgid);
  }
  void RememberExited(uint32_t tgid);
  static constexpr size_t kExitedTargetsKept = 4096;
  // Targets as records arrive, before the reorder window releases them: a
  // followed child is one from its fork on, though Targets learns of it
  // only at the fork's release (50 ms on; a short-lived child is gone by
  // then) and missed switch-ins are placed on arrival.
  bool IsTargetOnArrival(uint32_t tgid) const {
    return IsTarget(tgid) || forked_on_arrival_.contains(tgid);
  }
  // Children of targets forked and not yet gone, on arrival (followed only).
  absl::flat_hash_set<uint32_t> forked_on_arrival_;

  PipelineOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  Targets targets_;
  absl::flat_hash_set<uint32_t> exited_targets_;
  std::deque<uint32_t> exited_order_;  // oldest first, at most kExitedTargetsKept
  ProbeRecordDecoder probe_decoder_;
  ReorderBuffer reorder_;
  OffCpuTracker offcpu_;
  MissedSwitchIns missed_;
  MissedWakeups missed_wakeups_;
  OwnedEvent interval_;  // the off_cpu event being written, its buffers reused
  OwnedEvent unwound_;   // a return an exception's catch stands for
  ForeignThreads foreign_;
  OperationTracker operations_;
  UprobePairer calls_;
  LossLedger losses_;
  std::unique_ptr<StackSymbols> stacks_;  // null when not symbolizing
  std::unique_ptr<format::SegmentWriter> writer_;
  int64_t realtime_minus_monotonic_ns_ = 0;  // read at creation, for clock_sync records
  uint64_t created_ns_ = 0;
  uint64_t first_time_ns_ = 0;  // of the first event written, 0 none
  uint64_t last_time_ns_ = 0;
  uint64_t stopped_at_ns_ = 0;
  uint64_t malformed_ = 0;
  static constexpr uint32_t kReleaseEvery = 4096;
  // Records added since the reorder buffer last released what was due.
  uint32_t added_since_release_ = 0;
  uint64_t unwind_stopped_sched_ = 0;
  uint64_t unwind_stopped_cpu_ = 0;
  uint64_t write_errors_ = 0;
  uint64_t write_errors_logged_ = 0;
  uint64_t error_logged_at_ns_ = 0;  // trace time of the last write error logged
  std::map<std::string, uint64_t> unwarned_losses_;  // "source/reason" -> events
  uint64_t warned_at_ns_ = 0;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_PIPELINE_H_
