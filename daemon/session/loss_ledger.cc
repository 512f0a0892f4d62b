#include "daemon/session/loss_ledger.h"

#include <fmt/format.h>

#include "daemon/format/loss_tally.h"
#include "shared/records.h"

namespace loupe::session {
namespace {

using format::LossReason;
using format::LossSource;

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

std::vector<format::Loss> LossLedger::Since(const LossCounts& now) {
  std::vector<format::Loss> out;
  auto add = [&out](LossSource source, LossReason reason, uint64_t now, uint64_t before) {
    if (now > before) out.push_back({source, reason, now - before});
  };
  for (const CounterMeaning& meaning : kCounterMeanings) {
    add(meaning.source, meaning.reason, now.bpf[meaning.counter],
        reported_.bpf[meaning.counter]);
  }
  add(LossSource::kMerge, LossReason::kLate, now.late, reported_.late);
  add(LossSource::kMerge, LossReason::kMalformed, now.malformed, reported_.malformed);
  add(LossSource::kSched, LossReason::kUnwindStopped, now.unwind_stopped_sched,
      reported_.unwind_stopped_sched);
  add(LossSource::kCpuSample, LossReason::kUnwindStopped, now.unwind_stopped_cpu,
      reported_.unwind_stopped_cpu);
  const ProbeLosses& probe = now.probes;
  const ProbeLosses& before = reported_.probes;
  add(LossSource::kShim, LossReason::kStringTruncated, probe.shim_strings_cut,
      before.shim_strings_cut);
  add(LossSource::kUsdt, LossReason::kStringTruncated, probe.usdt_strings_cut,
      before.usdt_strings_cut);
  add(LossSource::kShim, LossReason::kUnreadable, probe.shim_unreadable, before.shim_unreadable);
  add(LossSource::kUsdt, LossReason::kUnreadable, probe.usdt_unreadable, before.usdt_unreadable);
  reported_ = now;
  return out;
}

void LossLedger::Count(const format::Loss& loss) {
  totals_[format::LossKey(loss.source, loss.reason)] += loss.count;
}

}  // namespace loupe::session
