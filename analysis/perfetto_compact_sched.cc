#include "analysis/perfetto_compact_sched.h"

#include "daemon/format/record.h"

namespace loupe::analysis {
namespace {

// TracePacket.ftrace_events; FtraceEventBundle; FtraceEventBundle.CompactSched
constexpr uint32_t kFtraceEvents = 1;
constexpr uint32_t kCpu = 1, kCompactSched = 4;
constexpr uint32_t kSwitchTimestamp = 1, kSwitchPrevState = 2, kSwitchNextPid = 3,
                   kSwitchNextPrio = 4, kInternTable = 5, kSwitchNextCommIndex = 6,
                   kWakingTimestamp = 7, kWakingPid = 8, kWakingTargetCpu = 9, kWakingPrio = 10,
                   kWakingCommIndex = 11;
// Records carry no priority; Perfetto wants one per event (columns of equal
// length), so every thread is given the kernel's default, nice 0.
constexpr char kDefaultPrio = 120;

void Append(std::string* column, uint64_t value) { format::wire::AppendVarint(column, value); }

}  // namespace

PerfettoCompactSched::Bundle& PerfettoCompactSched::At(uint32_t cpu) {
  if (cpu >= cpus_.size()) cpus_.resize(cpu + 1);
  return cpus_[cpu];
}

uint32_t PerfettoCompactSched::Comm(Bundle& bundle, uint32_t tid) {
  auto [it, added] = bundle.comm_of.try_emplace(tid, 0);
  if (added) {
    it->second = static_cast<uint32_t>(bundle.comms.size());
    bundle.comms.push_back(threads_.ThreadName(tid));
  }
  return it->second;
}

void PerfettoCompactSched::Switch(uint32_t cpu, uint64_t time_ns, uint32_t prev_state,
                                  uint32_t next_tid) {
  Bundle& bundle = At(cpu);
  Append(&bundle.switch_times, time_ns - bundle.last_switch_ns);
  bundle.last_switch_ns = time_ns;
  // Perfetto decodes the kernel's states only: Loupe's marks would read as a bogus one.
  Append(&bundle.prev_states, format::TaskState(prev_state));
  Append(&bundle.next_pids, next_tid);
  Append(&bundle.next_comms, Comm(bundle, next_tid));
  ++bundle.switches;
  Written(cpu, bundle);
}

void PerfettoCompactSched::Waking(uint32_t cpu, uint64_t time_ns, uint32_t tid,
                                  uint32_t target_cpu) {
  Bundle& bundle = At(cpu);
  Append(&bundle.waking_times, time_ns - bundle.last_waking_ns);
  bundle.last_waking_ns = time_ns;
  Append(&bundle.waking_pids, tid);
  Append(&bundle.waking_cpus, target_cpu);
  Append(&bundle.waking_comms, Comm(bundle, tid));
  ++bundle.wakings;
  Written(cpu, bundle);
}

void PerfettoCompactSched::Written(uint32_t cpu, Bundle& bundle) {
  if (bundle.switches + bundle.wakings >= kBundleEvents) Write(cpu, bundle);
}

void PerfettoCompactSched::Flush() {
  for (uint32_t cpu = 0; cpu < cpus_.size(); ++cpu) {
    if (cpus_[cpu].switches + cpus_[cpu].wakings != 0) Write(cpu, cpus_[cpu]);
  }
}

void PerfettoCompactSched::Write(uint32_t cpu, Bundle& bundle) {
  packet_.clear();
  ProtoBuilder packet(&packet_);
  packet.Varint(kCpu, cpu);
  const size_t compact = packet.Begin(kCompactSched);
  for (const std::string& comm : bundle.comms) packet.Bytes(kInternTable, comm);
  if (bundle.switches != 0) {
    packet.Bytes(kSwitchTimestamp, bundle.switch_times);
    packet.Bytes(kSwitchPrevState, bundle.prev_states);
    packet.Bytes(kSwitchNextPid, bundle.next_pids);
    packet.Bytes(kSwitchNextPrio, std::string(bundle.switches, kDefaultPrio));
    packet.Bytes(kSwitchNextCommIndex, bundle.next_comms);
  }
  if (bundle.wakings != 0) {
    packet.Bytes(kWakingTimestamp, bundle.waking_times);
    packet.Bytes(kWakingPid, bundle.waking_pids);
    packet.Bytes(kWakingTargetCpu, bundle.waking_cpus);
    packet.Bytes(kWakingPrio, std::string(bundle.wakings, kDefaultPrio));
    packet.Bytes(kWakingCommIndex, bundle.waking_comms);
  }
  packet.End(compact);
  sequence_.EmitPlain(kFtraceEvents, packet_);
  bundle = Bundle{};
}

}  // namespace loupe::analysis
