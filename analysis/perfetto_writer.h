// A trace as a Perfetto trace (protobuf, written packet by packet, so memory
// stays bounded by open spans and interned stacks, not trace length):
//   - a track per process and per thread (named), with shim spans as nested
//     slices, USDT probes, uprobe entries and instant events as instants;
//   - per thread, child tracks "off-CPU" (one slice per interval, named by
//     the state: sleeping, blocked, preempted; run-queue wait and waker in
//     its arguments) and "uprobes" (call-to-return slices);
//   - counters as counter tracks;
//   - one track per operation id (its begin/end), with a child per thread
//     holding that thread's spans of the operation;
//   - CPU samples as perf samples with interned callstacks;
//   - a clock snapshot (monotonic as the trace clock, and realtime).
#ifndef LOUPE_ANALYSIS_PERFETTO_WRITER_H_
#define LOUPE_ANALYSIS_PERFETTO_WRITER_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "daemon/format/record.h"
#include "perfetto/trace.pb.h"
#include "analysis/stack_profile.h"
#include "analysis/thread_directory.h"

namespace loupe::analysis {

class PerfettoWriter {
 public:
  // `names` names stack frames (its symbol tables are read; its stacks are not).
  PerfettoWriter(std::ostream& out, const StackProfile& names) : out_(out), names_(names) {}

  // Before the first Add: the clocks at one instant.
  void Start(uint64_t monotonic_ns, uint64_t realtime_ns);
  // Every record, in time order.
  void Add(const format::Record& record);

 private:
  perfetto::TracePacket Packet(uint64_t time_ns);
  void Emit(const perfetto::TracePacket& packet);
  uint64_t ProcessTrack(uint32_t pid);
  uint64_t ThreadTrack(uint32_t tid, bool renamed = false);
  uint64_t ChildTrack(uint64_t kind, uint32_t tid, const char* name);
  uint64_t CounterTrack(uint32_t pid, std::string_view name);
  uint64_t OperationTrack(uint64_t operation, std::string_view name);
  uint64_t OperationThreadTrack(uint64_t operation, uint32_t tid);
  void Descriptor(perfetto::TrackDescriptor descriptor);
  perfetto::TrackEvent* Event(perfetto::TracePacket& packet, perfetto::TrackEvent::Type type,
                              uint64_t track, std::string_view name);
  void Slice(uint64_t track, std::string_view name, uint64_t begin_ns, uint64_t end_ns,
             const std::vector<perfetto::DebugAnnotation>& args);
  void Sample(const format::Record& record, const format::CpuSample& sample);

  std::ostream& out_;
  const StackProfile& names_;
  ThreadDirectory threads_;
  std::set<uint64_t> described_;
  // Operations in progress (begun, or with spans open): forgotten when
  // neither, tracks and all, so memory follows what is open.
  struct Operation {
    std::string name;
    bool open = false;
    int open_spans = 0;
    std::vector<uint64_t> tracks;
  };
  void Release(uint64_t operation);
  std::map<uint64_t, Operation> operations_;
  std::map<uint64_t, uint64_t> span_operations_;  // open spans with an operation
  std::map<std::string, uint64_t> function_ids_;  // interned function names (= frame ids)
  std::map<std::vector<uint64_t>, uint64_t> callstack_ids_;
  std::string buffer_;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_WRITER_H_
