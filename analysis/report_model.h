// What `tracectl report` says about a trace. Records stream through one
// pass: the thread timeline ends intervals, each interval is added to the
// requests open on its thread and to the thread's totals (inside or
// outside requests); a request that ends adds its anatomy to its kind —
// by latency bucket, so that "the slow ones" (at or above the p90 bucket,
// or a threshold given) are summed exactly without keeping every request —
// and may join the slowest few. Finish() names and classifies it all once
// the segments' symbol tables are in. Memory is bounded by threads, kinds,
// latency buckets and distinct stacks, not by the length of the trace.
#ifndef LOUPE_ANALYSIS_REPORT_MODEL_H_
#define LOUPE_ANALYSIS_REPORT_MODEL_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "analysis/anatomy.h"
#include "analysis/latency_histogram.h"
#include "analysis/requests.h"
#include "analysis/stack_profile.h"
#include "analysis/thread_ledger.h"
#include "analysis/thread_timeline.h"
#include "analysis/wait_class.h"
#include "daemon/format/record.h"

namespace loupe::analysis {

struct ReportOptions {
  std::optional<uint32_t> pid;
  uint64_t since_ns = 0;           // from the first event
  uint64_t until_ns = UINT64_MAX;  // from the first event
  std::optional<uint64_t> operation;
  std::optional<uint64_t> slow_ns;  // default: the p90 bucket of each kind
  size_t list = 5;                  // slowest requests listed
  size_t top = 10;                  // rows of whole-trace tables
  std::vector<UsdtPair> pairs;
};

// ---- What Finish() produces, named and classified.

struct ThreadName {
  uint32_t tid = 0, pid = 0;
  std::string thread, process;
};

struct StackShare {
  std::string wait;  // class name
  uint64_t ns = 0;
  std::vector<NamedFrame> frames;  // the kernel frame that decided, then the user frames
  std::string function;            // innermost application frame
};

struct Breakdown {
  uint64_t evidence_count = 0;  // requests whose samples, holders and wakers are in the evidence
  uint64_t count = 0, duration_ns = 0, on_cpu_ns = 0, runq_ns = 0, unaccounted_ns = 0;
  uint64_t throttled_ns = 0;  // of runq_ns: waits that began with the cgroup's CPU quota spent
  uint64_t blocked_ns = 0;  // sleep excluded
  uint64_t sleep_ns = 0;
  uint64_t queued_ns = 0;  // passed on by one thread, not yet taken up by the next
  std::map<std::string, uint64_t> off_cpu_ns;  // class -> ns (blocked classes and sleep)
  std::string dominant;        // on_cpu, blocked, sleep, runqueue, queued, unaccounted
  std::string dominant_class;  // the largest blocked class when dominant is blocked
  uint64_t user_samples = 0, kernel_samples = 0;
  std::vector<std::pair<std::string, uint64_t>> functions;  // sampled leaf functions
  std::vector<StackShare> stacks;
  struct Holder {
    ThreadName who;
    uint64_t ns = 0;
    std::string doing;  // a traced holder's most sampled function meanwhile, "" unknown
  };
  std::vector<Holder> holders;
  struct Waker {
    ThreadName who;
    std::string context;  // task, timer, hardirq, softirq, nmi, unreported
    uint64_t ns = 0;
    std::string doing;
    bool doing_off_cpu = false;  // `doing` is where it waited itself, not sampled work
    // Off CPU itself: who ended that wait (the holder a queue of waiters
    // waited for, when the waker was the waiter before).
    std::optional<ThreadName> doing_woken_by;
  };
  std::vector<Waker> wakers;
  // Who ended most of the dominant kind of wait (the sentence's): the
  // largest waker overall may have ended another kind.
  std::optional<Waker> dominant_waker;
  struct Handoff {
    ThreadName from, to;  // who passed the operation on, who took it up
    uint64_t ns = 0;      // queued in between
  };
  std::vector<Handoff> handoffs;
  // While queued, what the takers did instead (Anatomy::taker_*).
  struct WhileQueued {
    uint64_t outside_ns = 0, inside_ns = 0, blocked_ns = 0, runq_ns = 0;
    uint64_t unplaced_ns = 0;  // of the queued time: when the trace cannot say what it did
    uint64_t unknown = 0;      // take-ups whose taker's history was too short
    std::string function;      // sampled, outside requests
  };
  WhileQueued taker;
  std::string sentence;

  double Share(uint64_t ns) const {
    return duration_ns == 0 ? 0 : static_cast<double>(ns) / static_cast<double>(duration_ns);
  }
};

struct KindReport {
  RequestKind kind;
  uint64_t count = 0, total_ns = 0, p50_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;
  uint64_t unpaired_begins = 0, unpaired_ends = 0;
  // Of count: uprobe calls an exception unwound, timed to its catch, and
  // calls a longjmp left, timed to the jump.
  uint64_t unwound = 0, longjmped = 0;
  // Operations passed on and not taken up by the end of the trace: no
  // duration, like a begin without its end.
  uint64_t passed_not_taken = 0;
  // Events lost that could have been this kind's begins or ends (its
  // source's, or any kind's lost in the merge, the writer or the shipper):
  // then a begin may have been paired with a later call's end.
  uint64_t pairing_lost = 0;
  uint64_t threshold_ns = 0;
  std::string threshold_rule;  // "p90" or "--slow"
  Breakdown slow;
};

struct RequestReport {
  RequestKind kind;
  std::vector<std::string> also;  // other requests of the same extent
  ThreadName thread;  // where it ended
  std::optional<ThreadName> passed_from;  // where it began, when passed between threads
  uint64_t begin_ns = 0, duration_ns = 0;
  std::vector<int64_t> args;
  Breakdown breakdown;
  format::Unwound unwound = format::Unwound::kNo;  // left by an exception or a longjmp
};

struct ThreadReport {
  ThreadName thread;
  Breakdown inside, outside;  // inside requests, outside them
};

class ReportModel {
 public:
  explicit ReportModel(ReportOptions options);

  // Before any record: each segment's header (uprobes with returns, sampling).
  void AddHeader(const v1::SegmentHeader& header);
  // Every record in time order, with its session's index among those read
  // together (format::TraceReader::session).
  void Add(const format::Record& record, uint32_t session = 0);
  // The session's records are all read (format::TraceReader::ended_sessions).
  void EndSession(uint32_t session) { timeline_.EndSession(session); }
  void AddSymbols(const v1::SymbolTable& table) { stacks_.AddSymbols(table); }
  // After every record and symbol table.
  void Finish();

  bool has_sched_data() const { return timeline_.has_sched_data(); }
  uint64_t first_ns() const { return first_ns_; }
  uint64_t last_ns() const { return last_ns_; }
  uint32_t sample_hz() const { return sample_hz_; }
  const std::vector<KindReport>& kinds() const { return kind_reports_; }
  const std::vector<RequestReport>& slowest() const { return slowest_reports_; }
  const std::vector<ThreadReport>& threads() const { return thread_reports_; }
  const StackProfile& stacks() const { return stacks_; }
  const std::map<std::string, uint64_t>& usdt() const { return usdt_; }
  // Span and operation ends whose begin is not in the trace (begun before
  // it, or the begin was lost): an end does not name its kind.
  uint64_t ends_without_begin() const { return ends_without_begin_; }
  // The first begin or end of any request, 0 none: the probes that see
  // requests attach after the scheduler's programs, so thread tables count
  // time in requests before it as outside them.
  uint64_t first_request_event_ns() const { return first_request_event_ns_; }
  // Switch-ins the kernel's tracepoint did not report, placed by louped from
  // the scheduler's own accounting (format::kSwitchInferred): to a few µs.
  uint64_t inferred_switches() const { return inferred_switches_; }
  // Stretches of the wanted threads' time, in the window, that no switch in
  // the trace places (one missing and not inferred): they read as unaccounted.
  uint64_t unplaced_stretches() const { return unplaced_stretches_; }
  // Sessions read together; threads traced by more than one of them, and
  // by two at the same time (whose earlier session's records are set aside).
  uint32_t sessions() const { return sessions_; }
  size_t threads_across_sessions() const { return timeline_.threads_across_sessions(); }
  size_t threads_in_overlapping_sessions() const { return timeline_.threads_in_overlapping_sessions(); }
  // Some session's segment 0 is not in the trace read.
  bool starts_mid_session() const { return starts_mid_session_; }
  uint64_t unplaced_ns() const { return unplaced_ns_; }
  uint64_t unplaced_last_end_ns() const { return unplaced_last_end_ns_; }  // 0: none
  // Every thread's time is placed by a context switch, none lost or missing.
  bool times_exact(uint64_t sched_lost) const {
    return has_sched_data() && sched_lost == 0 && unplaced_stretches_ == 0;
  }
  const ReportOptions& options() const { return options_; }
  // Sampled: self and total samples per function (the wanted threads', in the window).
  struct FunctionCost {
    std::string name;
    uint64_t self = 0, total = 0;
  };
  std::vector<FunctionCost> TopFunctions(size_t n) const;
  uint64_t top_function_samples() const { return top_function_samples_; }
  // "" for the whole trace, else " from +A s to +B s" (--since/--until).
  std::string WindowLabel() const;
  // Whether the trace has any record of process `pid` (for --pid).
  bool HasProcess(uint32_t pid) const { return stacks_.threads().Known(pid); }
  // The stacks threads waited in longest (each stack's waits summed across
  // threads), inside requests or outside them; n ≤ options().top.
  std::vector<StackShare> TopWaits(bool inside, size_t n) const;

 private:
  // An operation's parts on the threads that passed it on.
  struct Passed {
    uint32_t kind = 0;
    uint64_t begin_ns = 0;  // on the first thread
    std::vector<int64_t> args;
    uint32_t first_tid = 0, passer_tid = 0;
    uint64_t passed_ns = 0;
    Anatomy so_far;             // its evidence_count stays 0
    bool evidence_cut = false;  // a part's evidence log was cut
  };
  struct OpenRequest {
    uint32_t kind = 0;
    uint64_t key = 0;
    uint64_t begin_ns = 0;
    std::vector<int64_t> args;
    ThreadLedger::Mark mark;
    std::unique_ptr<Passed> carried;  // an operation taken up from another thread
  };
  struct ThreadAccount {
    std::vector<OpenRequest> open;  // innermost last
    uint64_t settled_until = 0;     // running time accounted up to here
    ThreadLedger ledger;
  };
  struct KindStats {
    LatencyHistogram latency;
    // Requests in buckets below this (well under the p90 so far) add their
    // times but not their evidence; a bucket that missed any says so.
    size_t evidence_from = 0;
    // Latency bucket -> the anatomy of its requests (made when first used).
    std::vector<std::unique_ptr<Anatomy>> by_bucket =
        std::vector<std::unique_ptr<Anatomy>>(LatencyHistogram::kBuckets);
    Anatomy over_threshold;               // with --slow
    uint64_t unpaired_begins = 0, unpaired_ends = 0, passed_not_taken = 0, unwound = 0,
             longjmped = 0;
  };
  struct Finished {
    uint32_t kind = 0;
    uint32_t tid = 0;
    uint32_t first_tid = 0;  // where it began, when passed between threads
    uint64_t begin_ns = 0, duration_ns = 0;
    std::vector<int64_t> args;
    Anatomy anatomy;
    format::Unwound unwound = format::Unwound::kNo;
  };

  bool Wanted(const format::Record& record, const RequestMark& mark) const;
  // Whether a begin takes up an operation another thread passed on.
  bool TakesUp(const RequestMark& mark) const;
  void OnInterval(const StateInterval& interval);
  void AddSample(const format::Record& record, uint32_t stack, const format::CpuSample& sample);
  // Whether `time_ns` is inside --since/--until; how much of [begin_ns, end_ns] is.
  bool InWindow(uint64_t time_ns) const;
  uint64_t WindowPart(uint64_t begin_ns, uint64_t end_ns) const;
  void Settle(uint32_t tid, ThreadAccount& account, uint64_t now);
  void Begin(const format::Record& record, const RequestMark& mark);
  void End(const format::Record& record, const RequestMark& mark);
  void LeaveSession(uint32_t tid);
  // An operation passed on: kept until a thread binds its id again.
  void Pass(const format::Record& record, ThreadAccount& account, OpenRequest request);
  bool Slowest(uint64_t duration_ns) const;  // would it join the slowest kept?
  uint64_t PairingLost(RequestSource source) const;
  void Keep(Finished finished);
  Breakdown Classify(const Anatomy& anatomy, std::string_view short_name);
  std::vector<StackShare> BlockingStacks(const Counts<uint64_t>& blocked, size_t n);
  std::string WaitOf(uint64_t evidence);
  ThreadName NameOf(uint32_t tid) const;
  std::string Sentence(const Breakdown& b, std::string_view short_name) const;
  // "; worker's CPU time: …": what the thread that took queued work up was
  // busy with instead, over the window.
  std::string TakerBusy(const ThreadName& taker) const;
  // The thread's account, made (keeping history once passes are seen) if new.
  ThreadAccount& AccountOf(uint32_t tid);
  // The innermost application function most samples are in ("" none).
  std::string TopApplicationFunction(const Counts<uint32_t>& samples) const;

  ReportOptions options_;
  StackProfile stacks_;
  ThreadTimeline timeline_;
  RequestKinds kinds_;
  std::vector<KindStats> kind_stats_;
  absl::flat_hash_map<uint32_t, ThreadAccount> accounts_;
  bool passes_seen_ = false;  // an operation was passed between threads
  std::vector<Finished> finished_;  // the slowest, slowest first
  absl::flat_hash_map<uint64_t, std::unique_ptr<Passed>> passed_;  // by request key
  std::map<std::string, uint64_t> usdt_;
  // Samples of the wanted threads inside the window, by stack: the hot functions.
  absl::flat_hash_map<uint32_t, uint64_t> samples_by_stack_;
  uint64_t top_function_samples_ = 0;
  absl::flat_hash_map<uint64_t, std::string> wait_of_;  // evidence -> class name
  uint64_t ends_without_begin_ = 0;
  uint64_t first_request_event_ns_ = 0;
  uint64_t inferred_switches_ = 0;
  uint64_t unplaced_stretches_ = 0, unplaced_ns_ = 0, unplaced_last_end_ns_ = 0;
  std::array<uint64_t, format::kMaxLossSource + 1> lost_by_source_{};
  uint64_t first_ns_ = 0, last_ns_ = 0;
  uint32_t sample_hz_ = 0;
  uint32_t sessions_ = 0;
  absl::flat_hash_set<std::string> sessions_from_start_, sessions_mid_;  // by their headers
  bool starts_mid_session_ = false;
  std::vector<KindReport> kind_reports_;
  std::vector<RequestReport> slowest_reports_;
  std::vector<ThreadReport> thread_reports_;
  std::array<std::vector<StackShare>, 2> top_waits_;  // outside, inside requests
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_REPORT_MODEL_H_
