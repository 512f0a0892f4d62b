// A trace as a Perfetto trace (protobuf, written packet by packet, so memory
// stays bounded by open spans, open requests and interned stacks, not trace
// length):
//   - a track per process and per thread (named), with shim spans as nested
//     slices, USDT probes, uprobe entries and instant events as instants;
//   - per thread, child tracks "scheduling" and "uprobes" (call-to-return
//     slices). "scheduling" shows the same state model as the report
//     (ThreadTimeline): blocked intervals named by their wait class, with
//     the blocking stack and the waker (a flow arrow from a traced waker's
//     "wakeup" instant), and "runnable" intervals with the CPU's holders;
//   - counters as counter tracks;
//   - requests (shim operations) on a bounded set of lanes under "requests";
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

#include "absl/container/flat_hash_map.h"
#include "analysis/stack_profile.h"
#include "analysis/thread_directory.h"
#include "analysis/thread_timeline.h"
#include "daemon/format/record.h"
#include "perfetto/trace.pb.h"

namespace loupe::analysis {

class PerfettoWriter {
 public:
  // At most this many request lanes; requests beyond are counted, not drawn.
  static constexpr size_t kMaxLanes = 32;

  // `stacks` names stack frames (fed every symbol table beforehand); the
  // writer interns the trace's stacks into it as they stream by.
  PerfettoWriter(std::ostream& out, StackProfile& stacks);

  // Before the first Add: the clocks at one instant.
  void Start(uint64_t monotonic_ns, uint64_t realtime_ns);
  // Every record, in time order.
  void Add(const format::Record& record);
  // After the last record: the states still open, and what was not drawn.
  void Finish();

 private:
  perfetto::TracePacket Packet(uint64_t time_ns);
  void Emit(const perfetto::TracePacket& packet);
  uint64_t ProcessTrack(uint32_t pid);
  uint64_t ThreadTrack(uint32_t tid, bool renamed = false);
  uint64_t ChildTrack(uint64_t kind, uint32_t tid, const char* name);
  uint64_t CounterTrack(uint32_t pid, std::string_view name);
  uint64_t RequestLane(size_t lane);
  void Descriptor(perfetto::TrackDescriptor descriptor);
  perfetto::TrackEvent* Event(perfetto::TracePacket& packet, perfetto::TrackEvent::Type type,
                              uint64_t track, std::string_view name);
  // `begin` carries the name, arguments and flows; type and track are set here.
  void Slice(uint64_t track, perfetto::TrackEvent begin, uint64_t begin_ns, uint64_t end_ns);
  // One per record kind drawn (the scheduling kinds are the timeline's).
  void DrawSpanBegin(const format::Record& record, const format::SpanBegin& begin);
  void DrawSpanEnd(const format::Record& record);
  void DrawInstant(const format::Record& record, const format::Instant& instant);
  void DrawUsdt(const format::Record& record, const format::UsdtEvent& usdt);
  void DrawUprobeEntry(const format::Record& record, const format::UprobeEntry& entry);
  void DrawUprobeCall(const format::Record& record, const format::UprobeReturn& ret);
  void DrawCounter(const format::Record& record, const format::Counter& counter);
  void DrawLoss(const format::Record& record, const format::Loss& loss);
  void Sample(const format::Record& record, const format::CpuSample& sample);
  void OnInterval(const StateInterval& interval);
  void Blocked(const StateInterval& interval);
  void Runnable(const StateInterval& interval);
  std::string Who(uint32_t tid) const;  // "name (tid N, process)"
  void BeginRequest(const format::Record& record, const format::OperationBegin& begin);
  void EndRequest(const format::Record& record, const format::OperationEnd& end);

  std::ostream& out_;
  StackProfile& stacks_;
  ThreadDirectory threads_;
  ThreadTimeline timeline_;  // reads threads_
  std::set<uint64_t> described_;
  uint64_t last_ns_ = 0;
  // A traced waker's flow, waiting for the woken thread's runnable slice
  // that starts at the wakeup: tid -> (wakeup time, flow id).
  absl::flat_hash_map<uint32_t, std::pair<uint64_t, uint64_t>> flows_;
  uint64_t next_flow_ = 1;
  // Requests drawn, by operation id -> lane; lane_busy_[i]: lane i + 1 holds one.
  absl::flat_hash_map<uint64_t, size_t> request_lanes_;
  std::vector<bool> lane_busy_;
  uint64_t requests_not_drawn_ = 0;
  std::map<std::string, uint64_t> function_ids_;  // interned function names (= frame ids)
  std::map<std::vector<uint64_t>, uint64_t> callstack_ids_;
  std::string buffer_;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_WRITER_H_
