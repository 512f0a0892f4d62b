// One traced thread's account while requests are open on it: running sums
// of its time by state, and a log of what its open requests will need as
// evidence (blocked intervals with their wakers, CPU holders, samples).
// A request remembers where the sums and logs stood when it began; when it
// ends, its anatomy is the difference — so nested requests cost no extra
// work per event, and a request far from slow skips its evidence entirely.
// The thread's time also adds up inside or outside requests, within the
// report's window (--since/--until) only: a request's anatomy is whole however
// far it reaches past the window.
#ifndef LOUPE_ANALYSIS_THREAD_LEDGER_H_
#define LOUPE_ANALYSIS_THREAD_LEDGER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/anatomy.h"
#include "analysis/recent.h"
#include "analysis/thread_timeline.h"

namespace loupe::analysis {

class ThreadLedger {
 public:
  // Where the ledger stood when a request began.
  struct Mark {
    uint64_t on_cpu_ns = 0, runq_ns = 0, throttled_ns = 0, blocked_ns = 0;
    size_t blocked_from = 0, evidence_from = 0;
    uint64_t evidence_cut = 0;  // the count of cuts when it began
  };

  // Requests open on the thread now (time spent counts as inside them).
  void Open();
  void Close();
  size_t depth() const { return depth_; }
  Mark Now() const;

  // `ns` of the interval go to the open requests, `window_ns` of them
  // (those inside the report's window) to the thread's totals.
  void AddInterval(const StateInterval& interval, uint64_t ns, uint64_t window_ns);
  void AddSample(uint64_t time_ns, uint32_t stack, bool kernel, bool in_window);
  // Adds what happened since `mark` to `into`: times always; with
  // `with_evidence` also the blocking stacks and wakers, and the samples and
  // CPU holders if the log kept them all.
  void AddSince(const Mark& mark, Anatomy* into, bool with_evidence) const;

  // What the thread did over a past stretch, from its recent history: on
  // CPU outside requests and in them (the requests the report follows),
  // blocked, waiting for a CPU, and its samples outside requests. What another thread's
  // queued request waited for it through. History is kept from the first
  // KeepHistory() (every interval that reaches past that time included).
  void KeepHistory() { keep_history_ = true; }
  struct Busy {
    uint64_t outside_ns = 0, inside_ns = 0, blocked_ns = 0, runq_ns = 0;
    std::vector<uint32_t> samples;  // stacks
  };
  // nullopt when the history kept (its last kHistory intervals) does not
  // reach back to `from`; `samples` empty when those kept do not.
  std::optional<Busy> BusyBetween(uint64_t from_ns, uint64_t to_ns) const;

  const Anatomy& inside() const { return inside_; }
  const Anatomy& outside() const { return outside_; }

 private:
  // A log past this many entries stops keeping samples and holders: a
  // request open that long says its evidence is partial instead of growing memory.
  static constexpr size_t kMaxEvidence = 1 << 18;
  // Intervals (and samples) of history kept: a queue's wait and more for
  // all but the busiest threads (running time is split at every request's
  // begin and end), in at most 16 KiB a thread.
  static constexpr size_t kHistory = 256;
  enum Doing : uint8_t { kOutside, kInside, kBlocked, kRunnable, kDoings };
  using Totals = std::array<uint64_t, kDoings>;  // by Doing
  struct Past {
    uint64_t begin_ns, end_ns;
    Doing doing;
    Totals totals;  // up to end_ns
  };
  struct PastSample {
    uint64_t time_ns;
    uint32_t stack;
  };
  void Remember(uint64_t begin_ns, uint64_t end_ns, Doing doing);
  // By Doing, what the history says was spent up to `time_ns`.
  Totals TotalsAt(uint64_t time_ns) const;
  struct Blocked {
    uint64_t evidence, waker;
    uint64_t ns;
    uint64_t doing;     // WakerDoingKey, 0 unknown
    uint64_t woken_by;  // Anatomy::waker_woken_by's key, 0 unknown
    bool woken;
  };
  struct Evidence {  // 16 bytes: a log holds up to kMaxEvidence
    uint32_t id;           // a stack (samples) or a tid (holders)
    uint32_t doing_stack;  // a holder's: Holder::doing_stack
    uint64_t kind : 2;     // 0 user sample, 1 kernel sample, 2 holder
    uint64_t ns : 62;
  };
  // Logs a wait of an open request; a run of timeouts before it gets its waker.
  void AddWait(const Blocked& wait);
  // On the CPU this long at most between a timer's wakeup and the same wait
  // again: a recheck, not work the wakeup was for.
  static constexpr uint64_t kTimeoutRecheckNs = 1'000'000;
  size_t depth_ = 0;
  // blocked_[timeout_run_from_...] were ended by timers, each followed at
  // once by the same wait again; SIZE_MAX none.
  size_t timeout_run_from_ = SIZE_MAX;
  uint64_t ran_since_wait_ns_ = 0;  // on the CPU since the last wait ended
  uint64_t on_cpu_ns_ = 0, runq_ns_ = 0, throttled_ns_ = 0, blocked_ns_ = 0;
  uint64_t cuts_ = 0;  // times the evidence log filled up
  std::vector<Blocked> blocked_;
  std::vector<Evidence> evidence_;
  Anatomy inside_, outside_;
  bool keep_history_ = false;
  Recent<Past, kHistory> past_;
  Recent<PastSample, kHistory> past_samples_;
  Totals totals_ = {};
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_THREAD_LEDGER_H_
