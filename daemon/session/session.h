// One tracing session: its targets, its record source, and a thread that
// drains the source in cycles through the pipeline (time order, off-CPU
// intervals, segments). The same engine runs inside louped and, when no
// daemon answers, inside tracectl (embedded mode). When the session ends,
// everything it held in the kernel and in memory is released; only its
// final stats remain.
#ifndef LOUPE_DAEMON_SESSION_SESSION_H_
#define LOUPE_DAEMON_SESSION_SESSION_H_

#include <spdlog/logger.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bpf/sources.h"
#include "daemon/format/segment_writer.h"
#include "daemon/probes/probe_plan.h"
#include "daemon/session/content_policy.h"
#include "daemon/session/exec_coverage.h"
#include "daemon/session/pipeline.h"
#include "daemon/session/record_source.h"
#include "daemon/session/ring_capture.h"

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
  // Also keep the drained ring bytes here (ring_capture.h), to replay later.
  std::string ring_capture_path;
  // At the session's end, how long the last segment waits for its symbols
  // at most (a Stop deadline can shorten it; see Session::Stop).
  uint64_t symbol_wait_ns = 30'000'000'000;
  // What the options builder changed of the request, said to the caller
  // among the session's warnings (e.g. kernel stacks off for non-root).
  std::vector<std::string> notes;
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
  // Once it has ended: on its own, "every target exited" or "its duration
  // elapsed"; stopped, what stopped it (set by louped's session manager).
  // "" while running.
  std::string ended_because;
};

class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Start(SessionOptions options,
                                                        std::shared_ptr<spdlog::logger> log);
  ~Session();

  using Deadline = std::chrono::steady_clock::time_point;
  // Detaches, drains what is left, seals the last segment. Idempotent. The
  // last segment waits for its symbols until `symbol_deadline` at most
  // (and never longer than options.symbol_wait_ns): louped's shutdown
  // passes what is left of its budget, so sealing ends before the watchdog.
  absl::Status Stop(Deadline symbol_deadline = Deadline::max());
  // Shortens the symbol wait of an end already asked for (by another
  // thread's Stop) to `symbol_deadline`, if the wait has not begun yet.
  void Hurry(Deadline symbol_deadline);
  // Asks the session to end without waiting for it (see WaitFinished).
  void RequestStop() { stop_requested_ = true; }
  // Blocks until the session ends by itself (duration, targets gone) or
  // `timeout_ns` passes; true if it has ended.
  bool WaitFinished(uint64_t timeout_ns);
  SessionStats stats() const;

 private:
  Session(SessionOptions options, std::shared_ptr<spdlog::logger> log)
      : options_(std::move(options)), log_(std::move(log)) {}
  v1::SegmentHeader Header() const;
  void Run();
  void Cycle(bool final);
  // A target called exec: says so when its probes no longer fire.
  void OnExec(uint32_t pid, uint32_t old_tid);
  void OnFork(uint32_t parent, uint32_t child);
  void PublishStats();
  uint64_t SymbolWaitNs() const;

  bool fork_warned_ = false;  // drain thread only
  SessionOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  uint64_t start_ns_ = 0;

  probes::ProbePlan plan_;  // its probe names outlive every event
  std::unique_ptr<ExecCoverage> exec_coverage_;  // made once the probes are placed
  // Owned by the session thread once it runs; released when it ends.
  std::unique_ptr<RingCaptureWriter> capture_;
  std::unique_ptr<RecordSource> source_;
  std::unique_ptr<Pipeline> pipeline_;
  size_t drained_bytes_ = 0;  // in the last cycle

  std::thread thread_;
  std::atomic<bool> stop_requested_ = false;
  // steady_clock nanoseconds; the latest moment the last seal may wait for symbols.
  std::atomic<int64_t> symbol_deadline_ns_ = INT64_MAX;
  mutable std::mutex mutex_;  // guards stats_ and finished_
  std::condition_variable finished_changed_;
  bool finished_ = false;
  SessionStats stats_;
  absl::Status final_status_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_SESSION_H_
