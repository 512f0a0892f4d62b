// Context switches and wakeups as Perfetto's own kernel scheduling data:
// per CPU, FtraceEventBundle.compact_sched (ftrace_event_bundle.proto),
// columns of switches and of wakings with delta timestamps and thread names
// interned per bundle. Perfetto turns them into its CPU tracks and each
// thread's states (running, runnable, sleeping, uninterruptible, with the
// waker), at a few bytes per event instead of a packet per event; the
// classified blocked slices stay track events on top (PerfettoWriter).
#ifndef LOUPE_ANALYSIS_PERFETTO_COMPACT_SCHED_H_
#define LOUPE_ANALYSIS_PERFETTO_COMPACT_SCHED_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/perfetto_sequence.h"
#include "analysis/thread_directory.h"

namespace loupe::analysis {

class PerfettoCompactSched {
 public:
  // A CPU's bundle is written once it holds this many events, so memory is
  // bounded by the number of CPUs.
  static constexpr size_t kBundleEvents = 4096;

  PerfettoCompactSched(PerfettoSequence& sequence, const ThreadDirectory& threads)
      : sequence_(sequence), threads_(threads) {}

  // Each CPU's events in time order (records are).
  void Switch(uint32_t cpu, uint64_t time_ns, uint32_t prev_state, uint32_t next_tid);
  void Waking(uint32_t cpu, uint64_t time_ns, uint32_t tid, uint32_t target_cpu);
  // A thread was named: the bundles written from now on use the new name.
  void Renamed() {
    for (Bundle& bundle : cpus_) bundle.comm_of.clear();
  }
  // Writes what every CPU holds.
  void Flush();

 private:
  // Columns already in packed varint form.
  struct Bundle {
    std::string switch_times, prev_states, next_pids, next_comms;
    std::string waking_times, waking_pids, waking_cpus, waking_comms;
    size_t switches = 0, wakings = 0;
    uint64_t last_switch_ns = 0, last_waking_ns = 0;
    std::vector<std::string> comms;                   // the bundle's intern_table
    absl::flat_hash_map<uint32_t, uint32_t> comm_of;  // tid -> index into comms
  };
  Bundle& At(uint32_t cpu);
  uint32_t Comm(Bundle& bundle, uint32_t tid);
  void Written(uint32_t cpu, Bundle& bundle);  // after an event: flushes a full bundle
  void Write(uint32_t cpu, Bundle& bundle);

  PerfettoSequence& sequence_;
  const ThreadDirectory& threads_;
  std::vector<Bundle> cpus_;
  std::string packet_;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_COMPACT_SCHED_H_
