// A trace as a Perfetto trace (protobuf, written packet by packet, so memory
// stays bounded by open spans, open requests and interned stacks, not trace
// length):
//   - a track per process and per thread (named), with shim spans as nested
//     slices, USDT probes, uprobe entries and instant events as instants;
//   - context switches and wakeups as Perfetto's kernel scheduling data
//     (analysis/perfetto_compact_sched.h): its CPU tracks and thread states,
//     runnable time and wakers included;
//   - per thread, child tracks "scheduling" and "uprobes" (call-to-return
//     slices). "scheduling" adds what Perfetto cannot know, from the same
//     state model as the report (ThreadTimeline): blocked intervals named by
//     their wait class, with the blocking stack and the waker;
//   - counters as counter tracks;
//   - requests (shim operations) on a bounded set of lanes under "requests";
//   - CPU samples as perf samples with interned callstacks;
//   - a clock snapshot (monotonic as the trace clock, and realtime).
// Deflated in batches or not (analysis/perfetto_deflate.h).
// Packet sequences (analysis/perfetto_sequence.h) carry it, one for each
// track's events and one for the rest, with names, annotation names,
// bounded annotation values and stacks interned and timestamps
// delta-encoded, as Perfetto's own producers write.
#ifndef LOUPE_ANALYSIS_PERFETTO_WRITER_H_
#define LOUPE_ANALYSIS_PERFETTO_WRITER_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "analysis/perfetto_callstacks.h"
#include "analysis/perfetto_compact_sched.h"
#include "analysis/perfetto_sequence.h"
#include "analysis/perfetto_stream.h"
#include "analysis/perfetto_track_event.h"
#include "analysis/stack_profile.h"
#include "analysis/thread_directory.h"
#include "analysis/thread_timeline.h"
#include "daemon/format/record.h"

namespace loupe::analysis {

class PerfettoWriter {
 public:
  // At most this many request lanes; requests beyond are counted, not drawn.
  static constexpr size_t kMaxLanes = 32;
  // Undrawn requests passed on and not yet taken up, remembered at once (the
  // drawn ones are at most kMaxLanes): past this a take-up may be drawn from
  // its own begin, as a request of its own.
  static constexpr size_t kMaxUndrawnPasses = 1 << 16;

  // `stacks` names stack frames (fed every symbol table beforehand); the
  // writer interns the trace's stacks into it as they stream by.
  PerfettoWriter(std::ostream& out, PerfettoCompression compression, StackProfile& stacks);

  // Before the first Add: the clocks at one instant.
  void Start(uint64_t monotonic_ns, uint64_t realtime_ns);
  // Every record, in time order.
  void Add(const format::Record& record);
  // After the last record: the states still open, and what was not drawn.
  // Everything is written to the stream by then.
  void Finish();

  uint64_t bytes_written() const { return stream_.bytes_written(); }  // exact after Finish

 private:
  // Track uuids are dense (small varints); a kind and an id name a track.
  enum class TrackKind : uint8_t {
    kProcess,
    kThread,
    kScheduling,
    kUprobe,
    kCounter,
    kRequests,
    kRequestLane,
    kLoss,
  };
  // The uuid of a track, and whether it is new (then describe it).
  std::pair<uint64_t, bool> Track(TrackKind kind, uint64_t id);
  void Describe(uint64_t uuid, uint64_t parent, std::string_view name);
  uint64_t ProcessTrack(uint32_t pid);
  uint64_t ThreadTrack(uint32_t tid, bool renamed = false);
  uint64_t ChildTrack(TrackKind kind, uint32_t tid, std::string_view name);
  uint64_t CounterTrack(uint32_t pid, std::string_view name);
  uint64_t RequestsTrack();
  uint64_t RequestLane(size_t lane);
  uint64_t LossTrack();
  // The sequence of a track's events, started when first asked for.
  PerfettoSequence& On(uint64_t track);
  void EndSlice(uint64_t track, uint64_t time_ns);
  // One per record kind drawn (the scheduling kinds are the timeline's).
  void DrawSpanBegin(const format::Record& record, const format::SpanBegin& begin);
  void DrawSpanEnd(const format::Record& record);
  void DrawInstant(const format::Record& record, const format::Instant& instant);
  void DrawUsdt(const format::Record& record, const format::UsdtEvent& usdt);
  void DrawUprobeEntry(const format::Record& record, const format::UprobeEntry& entry);
  void DrawUprobeCall(const format::Record& record, const format::UprobeReturn& ret);
  void DrawCounter(const format::Record& record, const format::Counter& counter);
  void DrawLoss(const format::Record& record, const format::Loss& loss);
  void Sample(const format::Record& record, uint32_t stack);
  void Blocked(const StateInterval& interval);
  void Throttled(const StateInterval& interval);
  // Annotation values, by PerfettoStream id: "name (tid N, process)"; a
  // stack's innermost application function; a stack in one line. Each is made once.
  uint64_t Who(uint32_t tid);
  uint64_t FunctionOf(uint32_t stack);
  uint64_t StackLineOf(uint32_t stack);
  std::string_view WaitName(uint32_t stack, uint32_t prev_state);
  void BeginRequest(const format::Record& record, const format::OperationBegin& begin);
  void EndRequest(const format::Record& record, const format::OperationEnd& end);
  // An instant on a request's lane: "passed on" or "taken up", by which thread.
  void RequestMoment(size_t lane, const format::Record& record, std::string_view what);

  PerfettoStream stream_;
  // Descriptors, samples, scheduling data, and the stacks' interned messages.
  PerfettoSequence sequence_;
  // Each track's events on a sequence of their own, by track uuid: they
  // name no track, and their times are deltas from the track's previous
  // event (a blocked slice's, written when it ends, included).
  std::vector<std::unique_ptr<PerfettoSequence>> track_sequences_;
  uint64_t start_ns_ = 0;
  StackProfile& stacks_;
  PerfettoCallstacks callstacks_;
  ThreadDirectory threads_;
  ThreadTimeline timeline_;  // reads threads_
  PerfettoCompactSched sched_;  // reads threads_
  absl::flat_hash_map<std::pair<TrackKind, uint64_t>, uint64_t> tracks_;
  std::string descriptor_;
  uint64_t last_ns_ = 0;
  uint32_t record_stack_ = StackProfile::kNoStack;  // of the record being added
  // Who(tid), forgotten whenever a thread or process is named.
  absl::flat_hash_map<uint32_t, uint64_t> who_;
  absl::flat_hash_map<uint32_t, uint64_t> function_of_, stack_line_of_;  // by stack id
  absl::flat_hash_map<std::pair<uint32_t, uint32_t>, std::string_view> wait_names_;
  // Requests drawn, by operation id -> lane; lane_busy_[i]: lane i + 1 holds one.
  absl::flat_hash_map<uint64_t, size_t> request_lanes_;
  std::vector<bool> lane_busy_;
  absl::flat_hash_set<uint64_t> passed_;  // operations passed on, drawn or not, not yet taken up
  uint64_t requests_not_drawn_ = 0;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_WRITER_H_
