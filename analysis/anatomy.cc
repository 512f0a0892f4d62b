#include "analysis/anatomy.h"

namespace loupe::analysis {

void Anatomy::AddInterval(const StateInterval& interval, uint64_t ns) {
  switch (interval.state) {
    case ThreadState::kRunning:
      on_cpu_ns += ns;
      break;
    case ThreadState::kBlocked:
      blocked_ns += ns;
      blocked.Add(EvidenceKey(interval.stack, interval.prev_state), ns);
      if (interval.wake.seen) {
        wakers_by_wait.Add({EvidenceKey(interval.stack, interval.prev_state),
                            WakerKey(interval.wake.tid, interval.wake.context)},
                           ns);
        if (interval.wake.doing_stack != 0) {
          waker_doing.Add(WakerDoingKey(interval.wake.tid, interval.wake.doing_stack,
                                        interval.wake.doing_off_cpu),
                          ns);
        }
        if (interval.wake.doing_woken_by != 0) {
          waker_woken_by.Add(uint64_t{interval.wake.tid} << 32 | interval.wake.doing_woken_by, ns);
        }
      }
      break;
    case ThreadState::kRunnable:
      runq_ns += ns;
      if (interval.throttled) {
        throttled_ns += ns;  // the quota kept it waiting, not whoever held the CPU
        break;
      }
      for (const Holder& holder : interval.holders) {
        AddHolder(holder.tid, holder.ns, holder.doing_stack);
      }
      break;
    case ThreadState::kUnknown:
      break;
  }
}

void Anatomy::AddHolder(uint32_t tid, uint64_t ns, uint32_t doing_stack) {
  holders.Add(tid, ns);
  if (doing_stack != 0) holder_doing.Add(WakerDoingKey(tid, doing_stack, false), ns);
}

void Anatomy::AddSample(uint32_t stack, bool kernel) {
  ++(kernel ? kernel_samples : user_samples);
  if (stack != 0) samples.Add(stack, 1);
}

void Anatomy::Merge(const Anatomy& other, bool with_evidence) {
  count += other.count;
  duration_ns += other.duration_ns;
  on_cpu_ns += other.on_cpu_ns;
  runq_ns += other.runq_ns;
  throttled_ns += other.throttled_ns;
  blocked_ns += other.blocked_ns;
  queued_ns += other.queued_ns;
  unplaced_ns += other.unplaced_ns;
  taker_outside_ns += other.taker_outside_ns;
  taker_inside_ns += other.taker_inside_ns;
  taker_blocked_ns += other.taker_blocked_ns;
  taker_runq_ns += other.taker_runq_ns;
  taker_unknown += other.taker_unknown;
  if (!with_evidence) return;
  handoffs.Merge(other.handoffs);
  taker_samples.Merge(other.taker_samples);
  blocked.Merge(other.blocked);
  evidence_count += other.evidence_count;
  user_samples += other.user_samples;
  kernel_samples += other.kernel_samples;
  holders.Merge(other.holders);
  holder_doing.Merge(other.holder_doing);
  wakers_by_wait.Merge(other.wakers_by_wait);
  waker_doing.Merge(other.waker_doing);
  waker_woken_by.Merge(other.waker_woken_by);
  samples.Merge(other.samples);
}

}  // namespace loupe::analysis
