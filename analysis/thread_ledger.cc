#include "analysis/thread_ledger.h"

namespace loupe::analysis {

void ThreadLedger::Open() {
  ++depth_;
  timeout_run_from_ = SIZE_MAX;  // a run is within one request's waits
}

void ThreadLedger::Close() {
  if (depth_ > 0) --depth_;
  timeout_run_from_ = SIZE_MAX;
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
  if (keep_history_ && interval.state != ThreadState::kUnknown) {
    // Running time may come in parts (requests opened or closed within
    // it): this call's is the last `ns` of the interval.
    Remember(interval.end_ns - ns, interval.end_ns,
             interval.state == ThreadState::kBlocked    ? kBlocked
             : interval.state == ThreadState::kRunnable ? kRunnable
             : depth_ > 0                               ? kInside
                                                        : kOutside);
  }
  switch (interval.state) {
    case ThreadState::kRunning:
      on_cpu_ns_ += ns;
      totals.on_cpu_ns += window_ns;
      ran_since_wait_ns_ += ns;
      return;
    case ThreadState::kBlocked:
      blocked_ns_ += ns;
      totals.blocked_ns += window_ns;
      if (window_ns > 0) {
        totals.blocked.Add(EvidenceKey(interval.stack, interval.prev_state), window_ns);
      }
      if (depth_ > 0) {
        const Blocked wait{EvidenceKey(interval.stack, interval.prev_state),
                           WakerKey(interval.wake.tid, interval.wake.context), ns,
                           interval.wake.doing_stack == 0
                               ? 0
                               : WakerDoingKey(interval.wake.tid, interval.wake.doing_stack,
                                               interval.wake.doing_off_cpu),
                           interval.wake.doing_woken_by == 0
                               ? 0
                               : uint64_t{interval.wake.tid} << 32 | interval.wake.doing_woken_by,
                           interval.wake.seen};
        AddWait(wait);
      }
      ran_since_wait_ns_ = 0;
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
        evidence_.push_back({holder.tid, holder.doing_stack, 2, holder.ns});
      }
      return;
    case ThreadState::kUnknown:
      totals.unplaced_ns += window_ns;
      timeout_run_from_ = SIZE_MAX;  // what it did meanwhile is not known
      return;
  }
}

void ThreadLedger::AddWait(const Blocked& wait) {
  // A timer woke the thread, which went straight back into the same wait:
  // that was a timeout (a deadlock check, a poll's tick, a timed wait's
  // recheck), not what ended the wait. Whoever ends the run of them ended
  // it all: the lock's holder, not the deadlock check's timer. Only waits
  // told apart by their stacks, and only a wakeup seen ends a run. (Wait
  // classes are known only once the symbols are, at the end: a sleep loop
  // is a run too, which its timer ends, unless a task cuts the last sleep
  // short — and then that task did end it.)
  const bool back_into_it = timeout_run_from_ < blocked_.size() && wait.woken &&
                            blocked_.back().evidence == wait.evidence &&
                            ran_since_wait_ns_ <= kTimeoutRecheckNs;
  if (back_into_it) {
    for (size_t i = timeout_run_from_; i < blocked_.size(); ++i) {
      blocked_[i].waker = wait.waker;
      blocked_[i].doing = wait.doing;
      blocked_[i].woken_by = wait.woken_by;
      blocked_[i].woken = wait.woken;
    }
  }
  const bool timer = wait.woken && EvidenceStack(wait.evidence) != 0 &&
                     (wait.waker & 0xff) == static_cast<uint8_t>(format::WakerContext::kTimer);
  if (!timer) {
    timeout_run_from_ = SIZE_MAX;
  } else if (!back_into_it) {
    timeout_run_from_ = blocked_.size();
  }
  blocked_.push_back(wait);
}

void ThreadLedger::AddSample(uint64_t time_ns, uint32_t stack, bool kernel, bool in_window) {
  Anatomy& totals = depth_ > 0 ? inside_ : outside_;
  if (in_window) ++(kernel ? totals.kernel_samples : totals.user_samples);
  if (depth_ == 0) {
    // What a thread does between requests: where queued work waited for it.
    if (in_window && stack != 0) outside_.samples.Add(stack, 1);
    if (keep_history_ && stack != 0) past_samples_.Push({time_ns, stack});
    return;
  }
  if (evidence_.size() >= kMaxEvidence) {
    ++cuts_;
    return;
  }
  evidence_.push_back({stack, 0, kernel ? 1u : 0u, 1});
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
    into->wakers_by_wait.Add({b.evidence, b.waker}, b.ns);
    if (b.doing != 0) into->waker_doing.Add(b.doing, b.ns);
    if (b.woken_by != 0) into->waker_woken_by.Add(b.woken_by, b.ns);
  }
  if (cuts_ != mark.evidence_cut) return;
  ++into->evidence_count;
  for (size_t i = mark.evidence_from; i < evidence_.size(); ++i) {
    const Evidence& e = evidence_[i];
    if (e.kind == 2) {
      into->AddHolder(e.id, e.ns, e.doing_stack);
    } else {
      into->AddSample(e.id, e.kind == 1);
    }
  }
}

void ThreadLedger::Remember(uint64_t begin_ns, uint64_t end_ns, Doing doing) {
  totals_[doing] += end_ns - begin_ns;
  past_.Push({begin_ns, end_ns, doing, totals_});
}

ThreadLedger::Totals ThreadLedger::TotalsAt(uint64_t time_ns) const {
  // The first interval ending after `time_ns`: what came before it is in
  // the totals of the one before; of it, the part before `time_ns`.
  size_t low = 0, high = past_.size();
  while (low < high) {
    const size_t middle = low + (high - low) / 2;
    if (past_[middle].end_ns <= time_ns) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  Totals totals = {};
  if (low > 0) {
    totals = past_[low - 1].totals;
  } else if (!past_.empty()) {
    const Past& oldest = past_[0];
    totals = oldest.totals;
    totals[oldest.doing] -= oldest.end_ns - oldest.begin_ns;
  }
  if (low < past_.size() && past_[low].begin_ns < time_ns) {
    totals[past_[low].doing] += time_ns - past_[low].begin_ns;
  }
  return totals;
}

std::optional<ThreadLedger::Busy> ThreadLedger::BusyBetween(uint64_t from_ns, uint64_t to_ns) const {
  // Dropped history leaves what came before the oldest kept unknown.
  if (past_.dropped() && from_ns < past_[0].begin_ns) return std::nullopt;
  const Totals from = TotalsAt(from_ns), to = TotalsAt(to_ns);
  // Intervals come in time order; were one not to, a negative part is none.
  auto part = [&](Doing doing) { return to[doing] > from[doing] ? to[doing] - from[doing] : 0; };
  Busy busy{.outside_ns = part(kOutside),
            .inside_ns = part(kInside),
            .blocked_ns = part(kBlocked),
            .runq_ns = part(kRunnable)};
  if (!past_samples_.dropped() || past_samples_[0].time_ns <= from_ns) {
    for (size_t i = 0; i < past_samples_.size(); ++i) {
      const PastSample& sample = past_samples_[i];
      if (sample.time_ns >= from_ns && sample.time_ns < to_ns) busy.samples.push_back(sample.stack);
    }
  }
  return busy;
}

}  // namespace loupe::analysis
