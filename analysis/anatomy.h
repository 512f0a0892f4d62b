// Where a request's time went (or a thread's, inside or outside requests),
// accumulated from its timeline as intervals end: exact on-CPU, run-queue
// and blocked time from the scheduler's records, the blocked time keyed by
// the switch-out it came from (classified once symbols are known), who held
// the CPU, who woke it, and the CPU samples that landed in it.
#ifndef LOUPE_ANALYSIS_ANATOMY_H_
#define LOUPE_ANALYSIS_ANATOMY_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "analysis/thread_timeline.h"

namespace loupe::analysis {

// A blocked interval's evidence: the switch-out's stack id and task state.
inline uint64_t EvidenceKey(uint32_t stack, uint32_t prev_state) {
  return uint64_t{stack} << 32 | prev_state;
}
inline uint32_t EvidenceStack(uint64_t key) { return static_cast<uint32_t>(key >> 32); }
inline uint32_t EvidenceState(uint64_t key) { return static_cast<uint32_t>(key); }

// A waker: its tid with the context it woke from.
// An interrupt's wakeups are one waker whatever task it interrupted.
inline uint64_t WakerKey(uint32_t tid, format::WakerContext context) {
  const uint32_t waker = context == format::WakerContext::kTask ? tid : 0;
  return uint64_t{waker} << 8 | static_cast<uint8_t>(context);
}

// What a waker was doing while a thread waited (or a holder while it held
// the CPU): its stack, and whether that is its own wait (it was off CPU
// too) rather than where its samples were.
inline uint64_t WakerDoingKey(uint32_t tid, uint32_t stack, bool off_cpu) {
  return uint64_t{tid} << 32 | uint64_t{off_cpu} << 31 | (stack & 0x7fffffffu);
}

// A handoff: the thread that passed an operation on, and the one that took it up.
inline uint64_t HandoffKey(uint32_t passer, uint32_t taker) {
  return uint64_t{passer} << 32 | taker;
}

// Amounts by key: a request has a handful, kept inline; an aggregate of
// many requests moves to a hash map.
template <typename Key>
class Counts {
 public:
  void Add(Key key, uint64_t amount) {
    if (map_.empty()) {
      for (auto& [known, value] : small_) {
        if (known == key) {
          value += amount;
          return;
        }
      }
      if (small_.size() < kSmall) {
        small_.emplace_back(key, amount);
        return;
      }
      for (const auto& [known, value] : small_) map_[known] += value;
      small_.clear();
    }
    map_[key] += amount;
  }
  void Merge(const Counts& other) {
    other.ForEach([this](Key key, uint64_t amount) { Add(key, amount); });
  }
  template <typename F>
  void ForEach(F f) const {
    for (const auto& [key, value] : small_) f(key, value);
    for (const auto& [key, value] : map_) f(key, value);
  }
  // Every entry, largest first (ties by key), at most n.
  std::vector<std::pair<Key, uint64_t>> Largest(size_t n) const;

 private:
  // A linear search of this many beats hashing, and a request rarely has more.
  static constexpr size_t kSmall = 32;
  absl::InlinedVector<std::pair<Key, uint64_t>, 4> small_;
  absl::flat_hash_map<Key, uint64_t> map_;
};

template <typename Key>
std::vector<std::pair<Key, uint64_t>> Counts<Key>::Largest(size_t n) const {
  std::vector<std::pair<Key, uint64_t>> rows;
  ForEach([&rows](Key key, uint64_t value) { rows.emplace_back(key, value); });
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  if (rows.size() > n) rows.resize(n);
  return rows;
}

struct Anatomy {
  uint64_t count = 0;        // requests summed into this
  uint64_t evidence_count = 0;  // of them, those whose evidence (samples, holders, wakers) is in
  uint64_t duration_ns = 0;  // their lengths, summed
  uint64_t on_cpu_ns = 0;
  uint64_t runq_ns = 0;
  uint64_t throttled_ns = 0;  // of runq_ns: waits that began with the CPU quota spent
  uint64_t blocked_ns = 0;   // all blocked time (`blocked` holds what has evidence)
  // Between threads: passed on by one (loupe_operation_pass), not yet
  // taken up by the next. No thread's time, so no state of one.
  uint64_t queued_ns = 0;
  Counts<uint64_t> handoffs;  // HandoffKey(passer, taker) -> ns queued between them
  // Meanwhile, what the thread that took it up did instead: on CPU outside
  // requests (sampled there: stack -> samples), on CPU in other requests,
  // off CPU. A take-up whose thread's history did not reach back to the
  // pass is counted in taker_unknown instead. Summed over requests, a
  // taker's time counts once for each request that waited on it.
  uint64_t taker_outside_ns = 0, taker_inside_ns = 0, taker_blocked_ns = 0, taker_runq_ns = 0;
  uint64_t taker_unknown = 0;
  Counts<uint32_t> taker_samples;
  Counts<uint64_t> blocked;      // EvidenceKey -> ns
  Counts<uint32_t> holders;      // tid -> ns it held the CPU waited for (not while throttled)
  Counts<uint64_t> holder_doing;  // WakerDoingKey(holder, sampled stack, false) -> ns
  // (EvidenceKey, WakerKey) -> ns: who ended which wait.
  Counts<std::pair<uint64_t, uint64_t>> wakers_by_wait;
  Counts<uint64_t> waker_doing;  // WakerDoingKey -> ns
  // A waker that was off CPU itself, and who ended that wait: (waker tid
  // << 32 | its waker's tid) -> ns.
  Counts<uint64_t> waker_woken_by;
  uint64_t user_samples = 0, kernel_samples = 0;
  Counts<uint32_t> samples;  // stack id -> samples

  // A thread's totals: its time no switch in the trace places. (A
  // request's is what its duration has beyond its parts.)
  uint64_t unplaced_ns = 0;

  // What the parts do not cover: time the trace cannot place. A thread's
  // totals have no duration: theirs is what no switch placed.
  uint64_t unaccounted_ns() const {
    if (duration_ns == 0) return unplaced_ns;
    const uint64_t parts = on_cpu_ns + runq_ns + blocked_ns + queued_ns;
    return duration_ns > parts ? duration_ns - parts : 0;
  }
  // `ns` of a run-queue wait while `tid` held the CPU, in `doing_stack` (0 unknown).
  void AddHolder(uint32_t tid, uint64_t ns, uint32_t doing_stack);
  // One ended interval of the thread (running, blocked or runnable).
  void AddInterval(const StateInterval& interval, uint64_t ns);
  void AddSample(uint32_t stack, bool kernel);
  // Times always; blocking stacks, samples, CPU holders and wakers only
  // `with_evidence` (the costly part, skipped for requests far from slow).
  void Merge(const Anatomy& other, bool with_evidence = true);
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_ANATOMY_H_
