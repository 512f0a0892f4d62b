// One tracing session: its targets, its BPF sources, and a thread that
// drains the ring buffer in batches, puts events in time order, derives
// off-CPU intervals, and writes segments. The same engine runs inside
// louped and, when no daemon answers, inside tracectl (embedded mode).
#ifndef LOUPE_DAEMON_SESSION_SESSION_H_
#define LOUPE_DAEMON_SESSION_SESSION_H_

#include <spdlog/logger.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "daemon/bpf/sources.h"
#include "daemon/format/segment_writer.h"
#include "daemon/probes/probe_plan.h"
#include "daemon/session/content_policy.h"
#include "daemon/session/foreign_threads.h"
#include "daemon/session/offcpu_tracker.h"
#include "daemon/session/operation_tracker.h"
#include "daemon/session/proc.h"
#include "daemon/session/probe_record_decoder.h"
#include "daemon/session/reorder_buffer.h"
#include "daemon/session/uprobe_pairer.h"
#include "daemon/symbols/address_spaces.h"
#include "daemon/symbols/segment_symbols.h"
#include "daemon/symbols/symbolizer.h"

namespace loupe::session {

struct SessionOptions {
  std::vector<uint32_t> pids;  // as the caller sees them
  uint32_t caller_pid = 0;     // whose PID namespace names them; 0: ours
  uint32_t caller_uid = 0;     // root may trace anything, others only their own
  bpf::SourceOptions sources;
  probes::ProbeRequests probes;  // the shim, USDT, uprobes
  ContentPolicy content_policy = ContentPolicy::kNames;
  bool symbolize = true;  // a symbol table in every sealed segment
  format::WriterOptions writer;  // directory, session id, rotation, retention
  uint64_t duration_ns = 0;      // 0: until stopped or every target has exited
  uint64_t reorder_window_ns = 50'000'000;
  size_t max_pending_events = 1 << 20;
  uint64_t drain_interval_ns = 10'000'000;
};

absl::Status ValidateSessionOptions(const SessionOptions& options);

struct SessionStats {
  std::string id;
  std::string directory;
  std::vector<uint32_t> targets;  // kernel-global pids still alive
  bool running = false;
  uint64_t events = 0;  // written
  std::map<std::string, uint64_t> events_by_kind;
  std::map<std::string, uint64_t> losses;  // "source/reason" -> count
  uint64_t bytes_written = 0;
  uint64_t segments = 0;
  std::string last_error;
  // Probes that could not be resolved or attached; the session runs without them.
  std::vector<std::string> warnings;
  uint32_t probe_sites = 0;  // attached
};

class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Start(SessionOptions options,
                                                        std::shared_ptr<spdlog::logger> log);
  ~Session();

  // Detaches, drains what is left, seals the last segment. Idempotent.
  absl::Status Stop();
  // Blocks until the session ends by itself (duration, targets gone) or
  // `timeout_ns` passes; true if it has ended.
  bool WaitFinished(uint64_t timeout_ns);
  SessionStats stats() const;

 private:
  Session(SessionOptions options, std::shared_ptr<spdlog::logger> log);
  absl::Status ResolveTargets();
  v1::SegmentHeader Header() const;
  void WritePreamble(format::SegmentWriter& writer);
  void Run();
  void Cycle(bool final);
  void OnRecord(std::span<const uint8_t> bytes);
  void Release(OwnedEvent& event);
  void Track(OwnedEvent& event);
  void Write(OwnedEvent& event);
  void CollectAddresses(const OwnedEvent& event);
  v1::SymbolTable SealSymbols();
  void ReportLosses();
  void PublishStats();
  void Loss(format::LossSource source, format::LossReason reason, uint64_t count);
  bool IsTarget(uint32_t tgid) const { return processes_.contains(tgid); }

  SessionOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  uint64_t start_ns_ = 0;

  // Owned by the session thread once it runs.
  std::map<uint32_t, ProcessIdentity> processes_;  // live targets by global pid
  std::unique_ptr<format::SegmentWriter> writer_;
  probes::ProbePlan plan_;  // its probe names outlive every event
  std::unique_ptr<bpf::Sources> sources_;
  ProbeRecordDecoder probe_decoder_;
  ReorderBuffer reorder_;
  OffCpuTracker offcpu_;
  ForeignThreads foreign_;
  OperationTracker operations_;
  UprobePairer calls_;
  ProbeLosses reported_probe_losses_;
  symbols::AddressSpaces address_spaces_;
  std::unique_ptr<symbols::Symbolizer> symbolizer_;  // null when not symbolizing
  symbols::SegmentSymbols segment_symbols_;          // of the open segment
  absl::flat_hash_set<uint64_t> seen_stacks_;        // of the open segment, by hash
  bpf::BpfCounters reported_{};
  uint64_t reported_late_ = 0;
  uint64_t last_time_ns_ = 0;
  uint64_t drained_bytes_ = 0;
  uint64_t write_errors_ = 0;
  uint64_t malformed_ = 0;
  uint64_t reported_malformed_ = 0;
  // Written per event by the session thread, published to stats_ per cycle.
  uint64_t written_ = 0;
  std::array<uint64_t, format::kMaxRecordKind + 1> written_by_kind_{};
  std::map<std::string, uint64_t> losses_;

  std::thread thread_;
  std::atomic<bool> stop_requested_ = false;
  mutable std::mutex mutex_;  // guards stats_ and finished_
  std::condition_variable finished_changed_;
  bool finished_ = false;
  SessionStats stats_;
  absl::Status final_status_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_SESSION_H_
