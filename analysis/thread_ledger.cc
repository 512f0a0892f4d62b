#include "analysis/thread_ledger.h"

namespace loupe::analysis {

void ThreadLedger::Close() {
  if (depth_ > 0) --depth_;
  // Nothing open can refer to the logs any more.
  if (depth_ == 0) {
    blocked_.clear();
    evidence_.clear();
  }
}

ThreadLedger::Mark ThreadLedger::Now() const {
  return {on_cpu_ns_, runq_ns_, throttled_ns_, blocked_ns_, blocked_.size(), evidence_.size(), cuts_};
}

// The thread's own totals keep times and blocking stacks; who held its CPU
// and who woke it are kept for requests.
void ThreadLedger::AddInterval(const StateInterval& interval, uint64_t ns, uint64_t window_ns) {
  Anatomy& totals = depth_ > 0 ? inside_ : outside_;
  switch (interval.state) {
    case ThreadState::kRunning:
      on_cpu_ns_ += ns;
      totals.on_cpu_ns += window_ns;
      return;
    case ThreadState::kBlocked:
      blocked_ns_ += ns;
      totals.blocked_ns += window_ns;
      if (window_ns > 0) {
        totals.blocked.Add(EvidenceKey(interval.stack, interval.prev_state), window_ns);
      }
      if (depth_ > 0) {
        blocked_.push_back({EvidenceKey(interval.stack, interval.prev_state),
                            WakerKey(interval.wake.tid, interval.wake.context), ns,
                            interval.wake.tid, interval.wake.doing_stack, interval.wake.seen});
      }
      return;
    case ThreadState::kRunnable:
      runq_ns_ += ns;
      totals.runq_ns += window_ns;
      if (interval.throttled) {
        // Whoever held the CPU, the quota kept the thread waiting: no holder is to blame.
        throttled_ns_ += ns;
        totals.throttled_ns += window_ns;
        return;
      }
      if (depth_ == 0) return;
      for (const Holder& holder : interval.holders) {
        if (evidence_.size() >= kMaxEvidence) {
          ++cuts_;
          return;
        }
        evidence_.push_back({holder.tid, 2, holder.ns});
      }
      return;
    case ThreadState::kUnknown:
      return;
  }
}

void ThreadLedger::AddSample(uint32_t stack, bool kernel, bool in_window) {
  Anatomy& totals = depth_ > 0 ? inside_ : outside_;
  if (in_window) ++(kernel ? totals.kernel_samples : totals.user_samples);
  if (depth_ == 0) {
    // What a thread does between requests: where queued work waited for it.
    if (in_window && stack != 0) outside_.samples.Add(stack, 1);
    return;
  }
  if (evidence_.size() >= kMaxEvidence) {
    ++cuts_;
    return;
  }
  evidence_.push_back({stack, static_cast<uint8_t>(kernel ? 1 : 0), 1});
}

void ThreadLedger::AddSince(const Mark& mark, Anatomy* into, bool with_evidence) const {
  into->on_cpu_ns += on_cpu_ns_ - mark.on_cpu_ns;
  into->runq_ns += runq_ns_ - mark.runq_ns;
  into->throttled_ns += throttled_ns_ - mark.throttled_ns;
  into->blocked_ns += blocked_ns_ - mark.blocked_ns;
  if (!with_evidence) return;
  for (size_t i = mark.blocked_from; i < blocked_.size(); ++i) {
    const Blocked& b = blocked_[i];
    into->blocked.Add(b.evidence, b.ns);
    if (!b.woken) continue;
    into->wakers.Add(b.waker, b.ns);
    if (b.doing != 0) into->waker_doing.Add(uint64_t{b.waker_tid} << 32 | b.doing, b.ns);
  }
  if (cuts_ != mark.evidence_cut) return;
  ++into->evidence_count;
  for (size_t i = mark.evidence_from; i < evidence_.size(); ++i) {
    const Evidence& e = evidence_[i];
    if (e.kind == 2) {
      into->holders.Add(e.id, e.ns);
    } else {
      into->AddSample(e.id, e.kind == 1);
    }
  }
}

}  // namespace loupe::analysis
