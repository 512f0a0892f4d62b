#include "analysis/perfetto_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <variant>

#include "absl/hash/hash.h"
#include "analysis/wait_class.h"
#include "daemon/base/overloaded.h"

namespace loupe::analysis {
namespace {

// TrackDescriptor, ProcessDescriptor, ThreadDescriptor (track_descriptor.proto)
constexpr uint32_t kUuid = 1, kTrackName = 2, kProcess = 3, kThread = 4, kParent = 5,
                   kCounter = 8;
constexpr uint32_t kPid = 1, kProcessName = 6;
constexpr uint32_t kTid = 2, kThreadName = 5;
// PerfSample (profile_packet.proto)
constexpr uint32_t kSampleCpu = 1, kSamplePid = 2, kSampleTid = 3, kSampleCallstack = 4;

// A blocking stack in one line, innermost first, so the frame that blocked leads.
std::string StackLine(const std::vector<NamedFrame>& frames) {
  std::string line;
  for (const NamedFrame& frame : frames) {
    if (!line.empty()) line += " < ";
    line += frame.function;
    if (frame.kernel) line += " [kernel]";
  }
  return line;
}

}  // namespace

PerfettoWriter::PerfettoWriter(std::ostream& out, PerfettoCompression compression,
                               StackProfile& stacks)
    : stream_(out, compression),
      sequence_(stream_),
      stacks_(stacks),
      callstacks_(sequence_, stacks),
      timeline_(threads_,
                [this](const StateInterval& interval) {
                  if (interval.state == ThreadState::kBlocked) Blocked(interval);
                  if (interval.state == ThreadState::kRunnable && interval.throttled) {
                    Throttled(interval);
                  }
                }),
      sched_(sequence_, threads_) {}

void PerfettoWriter::Start(uint64_t monotonic_ns, uint64_t realtime_ns) {
  start_ns_ = monotonic_ns;
  sequence_.Start(monotonic_ns, realtime_ns);
}

PerfettoSequence& PerfettoWriter::On(uint64_t track) {
  if (track >= track_sequences_.size()) track_sequences_.resize(track + 1);
  std::unique_ptr<PerfettoSequence>& sequence = track_sequences_[track];
  if (sequence == nullptr) {
    sequence = std::make_unique<PerfettoSequence>(stream_);
    sequence->StartTrack(start_ns_, track);
  }
  return *sequence;
}

std::pair<uint64_t, bool> PerfettoWriter::Track(TrackKind kind, uint64_t id) {
  auto [it, added] = tracks_.try_emplace({kind, id}, tracks_.size() + 1);
  return {it->second, added};
}

void PerfettoWriter::Describe(uint64_t uuid, uint64_t parent, std::string_view name) {
  descriptor_.clear();
  ProtoBuilder descriptor(&descriptor_);
  descriptor.Varint(kUuid, uuid);
  if (parent != 0) descriptor.Varint(kParent, parent);
  if (!name.empty()) descriptor.Bytes(kTrackName, name);
}

uint64_t PerfettoWriter::ProcessTrack(uint32_t pid) {
  const auto [uuid, added] = Track(TrackKind::kProcess, pid);
  if (added) {
    Describe(uuid, 0, "");
    ProtoBuilder descriptor(&descriptor_);
    const size_t process = descriptor.Begin(kProcess);
    descriptor.Varint(kPid, pid);
    descriptor.Bytes(kProcessName, threads_.ProcessName(pid));
    descriptor.End(process);
    sequence_.EmitPlain(perfetto_field::kTrackDescriptor, descriptor_);
  }
  return uuid;
}

uint64_t PerfettoWriter::ThreadTrack(uint32_t tid, bool renamed) {
  const auto [uuid, added] = Track(TrackKind::kThread, tid);
  if (added || renamed) {
    const uint32_t pid = threads_.PidOf(tid);
    const uint64_t parent = ProcessTrack(pid);
    Describe(uuid, parent, "");
    ProtoBuilder descriptor(&descriptor_);
    const size_t thread = descriptor.Begin(kThread);
    descriptor.Varint(kPid, pid);
    descriptor.Varint(kTid, tid);
    descriptor.Bytes(kThreadName, threads_.ThreadName(tid));
    descriptor.End(thread);
    sequence_.EmitPlain(perfetto_field::kTrackDescriptor, descriptor_);
  }
  return uuid;
}

uint64_t PerfettoWriter::ChildTrack(TrackKind kind, uint32_t tid, std::string_view name) {
  const auto [uuid, added] = Track(kind, tid);
  if (added) {
    Describe(uuid, ThreadTrack(tid), name);
    sequence_.EmitPlain(perfetto_field::kTrackDescriptor, descriptor_);
  }
  return uuid;
}

uint64_t PerfettoWriter::CounterTrack(uint32_t pid, std::string_view name) {
  const auto [uuid, added] = Track(TrackKind::kCounter, absl::HashOf(pid, name));
  if (added) {
    Describe(uuid, ProcessTrack(pid), name);
    ProtoBuilder descriptor(&descriptor_);
    descriptor.End(descriptor.Begin(kCounter));  // an empty CounterDescriptor: a counter track
    sequence_.EmitPlain(perfetto_field::kTrackDescriptor, descriptor_);
  }
  return uuid;
}

uint64_t PerfettoWriter::RequestsTrack() {
  const auto [uuid, added] = Track(TrackKind::kRequests, 0);
  if (added) {
    Describe(uuid, 0, "requests");
    sequence_.EmitPlain(perfetto_field::kTrackDescriptor, descriptor_);
  }
  return uuid;
}

uint64_t PerfettoWriter::RequestLane(size_t lane) {
  const auto [uuid, added] = Track(TrackKind::kRequestLane, lane);
  if (added) {
    Describe(uuid, RequestsTrack(), fmt::format("requests {}", lane + 1));
    sequence_.EmitPlain(perfetto_field::kTrackDescriptor, descriptor_);
  }
  return uuid;
}

uint64_t PerfettoWriter::LossTrack() {
  const auto [uuid, added] = Track(TrackKind::kLoss, 0);
  if (added) {
    Describe(uuid, 0, "Loupe: losses");
    sequence_.EmitPlain(perfetto_field::kTrackDescriptor, descriptor_);
  }
  return uuid;
}

void PerfettoWriter::EndSlice(uint64_t track, uint64_t time_ns) {
  TrackEventBuilder(On(track), TrackEventBuilder::kSliceEnd).Emit(time_ns);
}

void PerfettoWriter::Sample(const format::Record& record, uint32_t stack) {
  const uint32_t pid = threads_.PidOf(record.tid);
  ThreadTrack(record.tid);
  const uint64_t callstack = stack == StackProfile::kNoStack ? 0 : callstacks_.Of(stack);
  ProtoBuilder sample = sequence_.Payload();
  sample.Varint(kSampleCpu, record.cpu);
  sample.Varint(kSamplePid, pid);
  sample.Varint(kSampleTid, record.tid);
  if (callstack != 0) sample.Varint(kSampleCallstack, callstack);
  sequence_.Emit(record.time_ns, perfetto_field::kPerfSample);
}

uint64_t PerfettoWriter::Who(uint32_t tid) {
  auto [it, added] = who_.try_emplace(tid, 0);
  if (added) {
    const std::string name = threads_.ThreadName(tid);
    it->second = stream_.Id(
        PerfettoStream::Strings::kAnnotationValues,
        tid == 0         ? std::string("idle")
        : name.empty()   ? fmt::format("tid {} ({})", tid, threads_.ProcessNameOf(tid))
                         : fmt::format("{} (tid {}, {})", name, tid, threads_.ProcessNameOf(tid)));
  }
  return it->second;
}

uint64_t PerfettoWriter::FunctionOf(uint32_t stack) {
  auto [it, added] = function_of_.try_emplace(stack, 0);
  if (added) {
    it->second = stream_.Id(PerfettoStream::Strings::kAnnotationValues,
                            stacks_.InnermostApplicationFunction(stack));
  }
  return it->second;
}

uint64_t PerfettoWriter::StackLineOf(uint32_t stack) {
  auto [it, added] = stack_line_of_.try_emplace(stack, 0);
  if (added) {
    it->second = stream_.Id(PerfettoStream::Strings::kAnnotationValues,
                            StackLine(stacks_.StackFrames(stack)));
  }
  return it->second;
}

std::string_view PerfettoWriter::WaitName(uint32_t stack, uint32_t prev_state) {
  auto [it, added] = wait_names_.try_emplace({stack, prev_state});
  if (added) it->second = WaitClassName(ClassifyStack(stacks_, stack, prev_state));
  return it->second;
}

void PerfettoWriter::Blocked(const StateInterval& interval) {
  const Wake& wake = interval.wake;
  const uint64_t track = ChildTrack(TrackKind::kScheduling, interval.tid, "scheduling");
  TrackEventBuilder event(On(track), TrackEventBuilder::kSliceBegin);
  event.Name(WaitName(interval.stack, interval.prev_state));
  if (interval.stack != StackProfile::kNoStack) {
    event.LabelId("function", FunctionOf(interval.stack));
    event.LabelId("stack", StackLineOf(interval.stack));
  }
  if (wake.seen) {
    if (wake.context != format::WakerContext::kTask) {
      event.Label("waker", format::WakerContextName(wake.context));
    } else if (wake.tid == 0) {
      // The idle task wakes nobody itself: an interrupt it was running under did.
      event.Label("waker", "interrupt");
    } else {
      event.LabelId("waker", Who(wake.tid));
      event.Arg("waker_tid", wake.tid);
      if (wake.doing_stack != StackProfile::kNoStack) {
        event.LabelId("waker_doing", FunctionOf(wake.doing_stack));
      }
    }
  }
  event.Emit(interval.begin_ns);
  EndSlice(track, interval.end_ns);
}

// Perfetto draws the thread as runnable; the slice says what kept it from a
// CPU that may well have been idle.
void PerfettoWriter::Throttled(const StateInterval& interval) {
  const uint64_t track = ChildTrack(TrackKind::kScheduling, interval.tid, "scheduling");
  TrackEventBuilder event(On(track), TrackEventBuilder::kSliceBegin);
  event.Name("throttled");
  event.Label("why", "its cgroup's CPU quota was spent");
  event.Emit(interval.begin_ns);
  EndSlice(track, interval.end_ns);
}

// A request takes the lowest free lane, so the lanes in use stay few and
// stable while the trace is read once.
void PerfettoWriter::BeginRequest(const format::Record& record,
                                  const format::OperationBegin& begin) {
  if (auto drawn = request_lanes_.find(begin.operation_id); drawn != request_lanes_.end()) {
    // Bound again: on another thread, or the one that passed it on.
    if (passed_.erase(begin.operation_id) != 0) {
      RequestMoment(drawn->second, record, "taken up");
    }
    return;
  }
  // Taken up, but its first part was not drawn (every lane busy, or begun
  // before the trace): neither is the rest.
  if (passed_.erase(begin.operation_id) != 0) return;
  auto free = std::find(lane_busy_.begin(), lane_busy_.end(), false);
  if (free == lane_busy_.end()) {
    if (lane_busy_.size() == kMaxLanes) {
      ++requests_not_drawn_;
      return;
    }
    free = lane_busy_.insert(lane_busy_.end(), false);
  }
  *free = true;
  const size_t lane = static_cast<size_t>(free - lane_busy_.begin());
  request_lanes_[begin.operation_id] = lane;
  TrackEventBuilder event(On(RequestLane(lane)), TrackEventBuilder::kSliceBegin);
  event.Name(begin.name);
  event.Arg("operation_id", static_cast<int64_t>(begin.operation_id));
  event.Arg("tid", record.tid);
  event.Emit(record.time_ns);
}

void PerfettoWriter::EndRequest(const format::Record& record, const format::OperationEnd& end) {
  auto it = request_lanes_.find(end.operation_id);
  if (end.passed) {
    // The request goes on, on whichever thread takes it up: its slice too.
    if (it != request_lanes_.end()) {
      passed_.insert(end.operation_id);
      RequestMoment(it->second, record, "passed on");
    } else if (passed_.size() < kMaxLanes + kMaxUndrawnPasses) {
      passed_.insert(end.operation_id);
    }
    return;
  }
  passed_.erase(end.operation_id);
  if (it == request_lanes_.end()) return;  // not drawn, or begun before the trace
  EndSlice(RequestLane(it->second), record.time_ns);
  lane_busy_[it->second] = false;
  request_lanes_.erase(it);
}

void PerfettoWriter::RequestMoment(size_t lane, const format::Record& record, std::string_view what) {
  TrackEventBuilder event(On(RequestLane(lane)), TrackEventBuilder::kInstant);
  event.Name(what);
  event.Arg("tid", record.tid);
  event.LabelId("thread", Who(record.tid));
  event.Emit(record.time_ns);
}

void PerfettoWriter::Finish() {
  timeline_.Finish(last_ns_);
  sched_.Flush();
  if (requests_not_drawn_ != 0) {
    TrackEventBuilder event(On(RequestsTrack()), TrackEventBuilder::kInstant);
    event.UniqueName(fmt::format("{} requests not drawn: every lane busy", requests_not_drawn_));
    event.Arg("count", static_cast<int64_t>(requests_not_drawn_));
    event.Emit(last_ns_);
  }
  stream_.Flush();
}

void PerfettoWriter::Add(const format::Record& record) {
  using namespace format;
  last_ns_ = std::max(last_ns_, record.time_ns);
  const bool named = threads_.Observe(record);
  if (named) {
    who_.clear();
    sched_.Renamed();
  }
  const uint32_t stack = stacks_.Add(record);
  timeline_.Add(record, stack);
  std::visit(Overloaded{
                 [&](const ThreadInfo&) {
                   if (named) ThreadTrack(record.tid, true);
                 },
                 [&](const SpanBegin& begin) { DrawSpanBegin(record, begin); },
                 [&](const SpanEnd&) { DrawSpanEnd(record); },
                 [&](const OperationBegin& begin) { BeginRequest(record, begin); },
                 [&](const OperationEnd& end) { EndRequest(record, end); },
                 [&](const Instant& instant) { DrawInstant(record, instant); },
                 [&](const UsdtEvent& usdt) { DrawUsdt(record, usdt); },
                 [&](const UprobeEntry& entry) { DrawUprobeEntry(record, entry); },
                 [&](const UprobeReturn& ret) { DrawUprobeCall(record, ret); },
                 [&](const Counter& counter) { DrawCounter(record, counter); },
                 [&](const CpuSample&) { Sample(record, stack); },
                 [&](const Loss& loss) { DrawLoss(record, loss); },
                 [&](const SchedSwitch& sw) {
                   sched_.Switch(record.cpu, record.time_ns, sw.prev_state, sw.next_tid);
                 },
                 [&](const SchedWakeup& wakeup) {
                   sched_.Waking(record.cpu, record.time_ns, wakeup.woken_tid, wakeup.target_cpu);
                 },
                 // Drawn by the timeline's "scheduling" tracks, or only naming tracks.
                 [](const ClockSync&) {}, [](const ProcessInfo&) {}, [](const ProcessFork&) {},
                 [](const ProcessExec&) {}, [](const ThreadExit&) {}, [](const SchedMigrate&) {},
                 [](const OffCpu&) {}},
             record.payload);
}

void PerfettoWriter::DrawSpanBegin(const format::Record& record, const format::SpanBegin& begin) {
  TrackEventBuilder event(On(ThreadTrack(record.tid)), TrackEventBuilder::kSliceBegin);
  event.Name(begin.name);
  event.Arg("span_id", static_cast<int64_t>(begin.span_id));
  if (begin.operation_id != 0) event.Arg("operation_id", static_cast<int64_t>(begin.operation_id));
  event.Emit(record.time_ns);
}

void PerfettoWriter::DrawSpanEnd(const format::Record& record) {
  EndSlice(ThreadTrack(record.tid), record.time_ns);
}

void PerfettoWriter::DrawInstant(const format::Record& record, const format::Instant& instant) {
  TrackEventBuilder event(On(ThreadTrack(record.tid)), TrackEventBuilder::kInstant);
  event.Name(instant.name);
  for (const format::Field& field : instant.fields) event.Arg(field.key, field.value);
  event.Emit(record.time_ns);
}

void PerfettoWriter::DrawUsdt(const format::Record& record, const format::UsdtEvent& usdt) {
  TrackEventBuilder event(On(ThreadTrack(record.tid)), TrackEventBuilder::kInstant);
  event.Name(usdt.probe);
  for (size_t i = 0; i < usdt.args.size(); ++i) event.Arg(fmt::format("arg{}", i), usdt.args[i]);
  if (!usdt.str_arg.empty()) event.Arg("str", format::Value::String(usdt.str_arg));
  event.Emit(record.time_ns);
}

void PerfettoWriter::DrawUprobeEntry(const format::Record& record,
                                     const format::UprobeEntry& entry) {
  TrackEventBuilder event(On(ChildTrack(TrackKind::kUprobe, record.tid, "uprobes")),
                          TrackEventBuilder::kInstant);
  event.Name(entry.probe);
  for (size_t i = 0; i < entry.args.size(); ++i) event.Arg(fmt::format("arg{}", i), entry.args[i]);
  event.Emit(record.time_ns);
}

void PerfettoWriter::DrawUprobeCall(const format::Record& record,
                                    const format::UprobeReturn& ret) {
  const uint64_t time = record.time_ns;
  if (ret.duration_ns == 0 || ret.duration_ns > time) return;  // not paired with its entry
  const uint64_t track = ChildTrack(TrackKind::kUprobe, record.tid, "uprobes");
  TrackEventBuilder call(On(track), TrackEventBuilder::kSliceBegin);
  call.Name(ret.probe);
  if (ret.unwound == format::Unwound::kByException) {
    call.Arg("unwound", format::Value::String("by an exception; ends where it was caught"));
  } else if (ret.unwound == format::Unwound::kByLongjmp) {
    call.Arg("unwound", format::Value::String("by a longjmp; ends at the jump"));
  } else {
    call.Arg("retval", ret.retval);
  }
  call.Emit(time - ret.duration_ns);
  EndSlice(track, time);
}

void PerfettoWriter::DrawCounter(const format::Record& record, const format::Counter& counter) {
  TrackEventBuilder event(On(CounterTrack(threads_.PidOf(record.tid), counter.name)),
                          TrackEventBuilder::kCounter);
  event.Counter(counter.value);
  event.Emit(record.time_ns);
}

void PerfettoWriter::DrawLoss(const format::Record& record, const format::Loss& loss) {
  TrackEventBuilder event(On(LossTrack()), TrackEventBuilder::kInstant);
  // A cut (a stack or string shortened) is not a lost event: named as verify names it.
  event.UniqueName(fmt::format("{} {} {} ({})", format::IsCut(loss.reason) ? "cut" : "lost",
                               loss.count, format::LossSourceName(loss.source),
                               format::LossReasonName(loss.reason)));
  event.Arg("count", static_cast<int64_t>(loss.count));
  event.Emit(record.time_ns);
}

}  // namespace loupe::analysis
