#include "analysis/perfetto_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <variant>

#include "absl/hash/hash.h"
#include "analysis/wait_class.h"
#include "daemon/base/overloaded.h"
#include "daemon/format/wire.h"

namespace loupe::analysis {
namespace {

constexpr uint32_t kSequence = 1;
constexpr uint32_t kStateCleared = 1;  // TracePacket.sequence_flags
constexpr uint32_t kNeedsState = 2;
constexpr uint32_t kTraceField = 1;  // Trace.packet

// Track uuids: a kind in the top byte, an id below.
enum TrackKind : uint64_t {
  kProcessTrack = 1,
  kThreadTrack,
  kSchedulingTrack,
  kUprobeTrack,
  kCounterTrack,
  kRequestsTrack,
  kRequestLaneTrack,
  kLossTrack,
};
uint64_t Uuid(TrackKind kind, uint64_t id) { return kind << 56 | (id & ((1ull << 56) - 1)); }

perfetto::DebugAnnotation Arg(std::string_view name, int64_t value) {
  perfetto::DebugAnnotation arg;
  arg.set_name(std::string(name));
  arg.set_int_value(value);
  return arg;
}

perfetto::DebugAnnotation Arg(std::string_view name, const format::Value& value) {
  perfetto::DebugAnnotation arg;
  arg.set_name(std::string(name));
  switch (value.type) {
    case format::ValueType::kInt:
      arg.set_int_value(value.AsInt());
      break;
    case format::ValueType::kUint:
    case format::ValueType::kBytes:
      arg.set_uint_value(value.bits);
      break;
    case format::ValueType::kDouble:
      arg.set_double_value(value.AsDouble());
      break;
    case format::ValueType::kBool:
      arg.set_bool_value(value.bits != 0);
      break;
    case format::ValueType::kString:
      arg.set_string_value(std::string(value.text));
      break;
  }
  return arg;
}

perfetto::DebugAnnotation Arg(std::string_view name, std::string value) {
  perfetto::DebugAnnotation arg;
  arg.set_name(std::string(name));
  arg.set_string_value(std::move(value));
  return arg;
}

std::string Duration(uint64_t ns) {
  return ns >= 1'000'000 ? fmt::format("{:.1f} ms", ns / 1e6) : fmt::format("{:.1f} us", ns / 1e3);
}

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

PerfettoWriter::PerfettoWriter(std::ostream& out, StackProfile& stacks)
    : out_(out),
      stacks_(stacks),
      timeline_(threads_, [this](const StateInterval& interval) { OnInterval(interval); }) {}

perfetto::TracePacket PerfettoWriter::Packet(uint64_t time_ns) {
  perfetto::TracePacket packet;
  packet.set_timestamp(time_ns);
  packet.set_timestamp_clock_id(perfetto::BUILTIN_CLOCK_MONOTONIC);
  packet.set_trusted_packet_sequence_id(kSequence);
  return packet;
}

void PerfettoWriter::Emit(const perfetto::TracePacket& packet) {
  buffer_.clear();
  format::wire::AppendBytesField(&buffer_, kTraceField, packet.SerializeAsString());
  out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
}

void PerfettoWriter::Start(uint64_t monotonic_ns, uint64_t realtime_ns) {
  perfetto::TracePacket packet = Packet(monotonic_ns);
  packet.set_sequence_flags(kStateCleared);
  perfetto::ClockSnapshot* clocks = packet.mutable_clock_snapshot();
  clocks->set_primary_trace_clock(perfetto::BUILTIN_CLOCK_MONOTONIC);
  auto* monotonic = clocks->add_clocks();
  monotonic->set_clock_id(perfetto::BUILTIN_CLOCK_MONOTONIC);
  monotonic->set_timestamp(monotonic_ns);
  auto* realtime = clocks->add_clocks();
  realtime->set_clock_id(perfetto::BUILTIN_CLOCK_REALTIME);
  realtime->set_timestamp(realtime_ns);
  Emit(packet);
}

void PerfettoWriter::Descriptor(perfetto::TrackDescriptor descriptor) {
  perfetto::TracePacket packet;
  packet.set_trusted_packet_sequence_id(kSequence);
  *packet.mutable_track_descriptor() = std::move(descriptor);
  Emit(packet);
}

uint64_t PerfettoWriter::ProcessTrack(uint32_t pid) {
  const uint64_t uuid = Uuid(kProcessTrack, pid);
  if (described_.insert(uuid).second) {
    perfetto::TrackDescriptor descriptor;
    descriptor.set_uuid(uuid);
    descriptor.mutable_process()->set_pid(static_cast<int32_t>(pid));
    descriptor.mutable_process()->set_process_name(threads_.ProcessName(pid));
    Descriptor(std::move(descriptor));
  }
  return uuid;
}

uint64_t PerfettoWriter::ThreadTrack(uint32_t tid, bool renamed) {
  const uint64_t uuid = Uuid(kThreadTrack, tid);
  if (described_.insert(uuid).second || renamed) {
    const uint32_t pid = threads_.PidOf(tid);
    perfetto::TrackDescriptor descriptor;
    descriptor.set_uuid(uuid);
    descriptor.set_parent_uuid(ProcessTrack(pid));
    descriptor.mutable_thread()->set_pid(static_cast<int32_t>(pid));
    descriptor.mutable_thread()->set_tid(static_cast<int32_t>(tid));
    descriptor.mutable_thread()->set_thread_name(threads_.ThreadName(tid));
    Descriptor(std::move(descriptor));
  }
  return uuid;
}

uint64_t PerfettoWriter::ChildTrack(uint64_t kind, uint32_t tid, const char* name) {
  const uint64_t uuid = Uuid(static_cast<TrackKind>(kind), tid);
  if (described_.insert(uuid).second) {
    perfetto::TrackDescriptor descriptor;
    descriptor.set_uuid(uuid);
    descriptor.set_parent_uuid(ThreadTrack(tid));
    descriptor.set_name(name);
    Descriptor(std::move(descriptor));
  }
  return uuid;
}

uint64_t PerfettoWriter::CounterTrack(uint32_t pid, std::string_view name) {
  const uint64_t uuid = Uuid(kCounterTrack, absl::HashOf(pid, name));
  if (described_.insert(uuid).second) {
    perfetto::TrackDescriptor descriptor;
    descriptor.set_uuid(uuid);
    descriptor.set_parent_uuid(ProcessTrack(pid));
    descriptor.set_name(std::string(name));
    descriptor.mutable_counter();
    Descriptor(std::move(descriptor));
  }
  return uuid;
}

uint64_t PerfettoWriter::RequestLane(size_t lane) {
  const uint64_t parent = Uuid(kRequestsTrack, 0);
  if (described_.insert(parent).second) {
    perfetto::TrackDescriptor descriptor;
    descriptor.set_uuid(parent);
    descriptor.set_name("requests");
    Descriptor(std::move(descriptor));
  }
  const uint64_t uuid = Uuid(kRequestLaneTrack, lane);
  if (described_.insert(uuid).second) {
    perfetto::TrackDescriptor descriptor;
    descriptor.set_uuid(uuid);
    descriptor.set_parent_uuid(parent);
    descriptor.set_name(fmt::format("requests {}", lane + 1));
    Descriptor(std::move(descriptor));
  }
  return uuid;
}

perfetto::TrackEvent* PerfettoWriter::Event(perfetto::TracePacket& packet,
                                            perfetto::TrackEvent::Type type, uint64_t track,
                                            std::string_view name) {
  perfetto::TrackEvent* event = packet.mutable_track_event();
  event->set_type(type);
  event->set_track_uuid(track);
  if (!name.empty()) event->set_name(std::string(name));
  return event;
}

void PerfettoWriter::Slice(uint64_t track, perfetto::TrackEvent begin, uint64_t begin_ns,
                           uint64_t end_ns) {
  perfetto::TracePacket begin_packet = Packet(begin_ns);
  begin.set_type(perfetto::TrackEvent::TYPE_SLICE_BEGIN);
  begin.set_track_uuid(track);
  *begin_packet.mutable_track_event() = std::move(begin);
  Emit(begin_packet);
  perfetto::TracePacket end = Packet(end_ns);
  Event(end, perfetto::TrackEvent::TYPE_SLICE_END, track, "");
  Emit(end);
}

// Function names and stacks are interned on the one packet sequence: a new
// name or stack travels in the packet that first uses it.
void PerfettoWriter::Sample(const format::Record& record, const format::CpuSample& sample) {
  perfetto::TracePacket packet = Packet(record.time_ns);
  packet.set_sequence_flags(kNeedsState);
  const uint32_t pid = threads_.PidOf(record.tid);
  std::vector<uint64_t> frames;  // innermost first, then reversed
  auto add = [&](uint64_t address, bool kernel) {
    for (NamedFrame& frame : stacks_.Frames(pid, address, kernel)) {
      const std::string name = kernel ? frame.function + " [kernel]" : frame.function;
      auto [it, added] = function_ids_.emplace(name, function_ids_.size() + 1);
      if (added) {
        auto* interned = packet.mutable_interned_data()->add_function_names();
        interned->set_iid(it->second);
        interned->set_str(name);
        auto* interned_frame = packet.mutable_interned_data()->add_frames();
        interned_frame->set_iid(it->second);
        interned_frame->set_function_name_id(it->second);
      }
      frames.push_back(it->second);
    }
  };
  for (uint64_t address : sample.kernel_stack) add(address, true);
  for (uint64_t address : sample.user_stack) add(address, false);
  std::reverse(frames.begin(), frames.end());
  auto [stack, added] = callstack_ids_.emplace(frames, callstack_ids_.size() + 1);
  if (added) {
    auto* callstack = packet.mutable_interned_data()->add_callstacks();
    callstack->set_iid(stack->second);
    for (uint64_t frame : frames) callstack->add_frame_ids(frame);
  }
  ThreadTrack(record.tid);
  perfetto::PerfSample* out = packet.mutable_perf_sample();
  out->set_cpu(record.cpu);
  out->set_pid(pid);
  out->set_tid(record.tid);
  out->set_callstack_iid(stack->second);
  Emit(packet);
}

std::string PerfettoWriter::Who(uint32_t tid) const {
  if (tid == 0) return "idle";
  const std::string name = threads_.ThreadName(tid);
  return name.empty() ? fmt::format("tid {} ({})", tid, threads_.ProcessNameOf(tid))
                      : fmt::format("{} (tid {}, {})", name, tid, threads_.ProcessNameOf(tid));
}

void PerfettoWriter::OnInterval(const StateInterval& interval) {
  if (interval.state == ThreadState::kBlocked) {
    Blocked(interval);
  } else if (interval.state == ThreadState::kRunnable) {
    Runnable(interval);
  }
}

void PerfettoWriter::Blocked(const StateInterval& interval) {
  perfetto::TrackEvent event;
  event.set_name(
      std::string(WaitClassName(ClassifyStack(stacks_, interval.stack, interval.prev_state))));
  if (interval.stack != StackProfile::kNoStack) {
    *event.add_debug_annotations() =
        Arg("function", stacks_.InnermostApplicationFunction(interval.stack));
    *event.add_debug_annotations() = Arg("stack", StackLine(stacks_.StackFrames(interval.stack)));
  }
  const Wake& wake = interval.wake;
  if (wake.seen) {
    if (wake.context != format::WakerContext::kTask) {
      *event.add_debug_annotations() =
          Arg("waker", std::string(format::WakerContextName(wake.context)));
    } else if (wake.tid == 0) {
      // The idle task wakes nobody itself: an interrupt it was running under did.
      *event.add_debug_annotations() = Arg("waker", std::string("interrupt"));
    } else {
      *event.add_debug_annotations() = Arg("waker", Who(wake.tid));
      *event.add_debug_annotations() = Arg("waker_tid", wake.tid);
      if (wake.doing_stack != StackProfile::kNoStack) {
        *event.add_debug_annotations() =
            Arg("waker_doing", stacks_.InnermostApplicationFunction(wake.doing_stack));
      }
    }
    // Only a traced waker has a track for the arrow to leave from.
    if (wake.context == format::WakerContext::kTask && threads_.Traced(wake.tid)) {
      const uint64_t flow = next_flow_++;
      perfetto::TracePacket packet = Packet(interval.end_ns);
      perfetto::TrackEvent* wakeup =
          Event(packet, perfetto::TrackEvent::TYPE_INSTANT, ThreadTrack(wake.tid), "wakeup");
      wakeup->add_flow_ids(flow);
      *wakeup->add_debug_annotations() = Arg("woken", Who(interval.tid));
      Emit(packet);
      flows_[interval.tid] = {interval.end_ns, flow};
    }
  }
  Slice(ChildTrack(kSchedulingTrack, interval.tid, "scheduling"), std::move(event),
        interval.begin_ns, interval.end_ns);
}

void PerfettoWriter::Runnable(const StateInterval& interval) {
  perfetto::TrackEvent event;
  event.set_name("runnable");
  if (auto flow = flows_.find(interval.tid); flow != flows_.end()) {
    if (flow->second.first == interval.begin_ns)
      event.add_terminating_flow_ids(flow->second.second);
    flows_.erase(flow);
  }
  std::vector<Holder> holders(interval.holders.begin(), interval.holders.end());
  std::sort(holders.begin(), holders.end(), [](const Holder& a, const Holder& b) {
    return a.ns != b.ns ? a.ns > b.ns : a.tid < b.tid;
  });
  std::string held_by;
  for (const Holder& holder : holders) {
    if (!held_by.empty()) held_by += "; ";
    held_by += fmt::format("{} {}", Who(holder.tid), Duration(holder.ns));
  }
  if (!held_by.empty()) *event.add_debug_annotations() = Arg("held by", std::move(held_by));
  *event.add_debug_annotations() = Arg("cpu", interval.cpu);
  Slice(ChildTrack(kSchedulingTrack, interval.tid, "scheduling"), std::move(event),
        interval.begin_ns, interval.end_ns);
}

// A request takes the lowest free lane, so the lanes in use stay few and
// stable while the trace is read once.
void PerfettoWriter::BeginRequest(const format::Record& record,
                                  const format::OperationBegin& begin) {
  if (request_lanes_.contains(begin.operation_id)) return;
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
  perfetto::TracePacket packet = Packet(record.time_ns);
  perfetto::TrackEvent* event =
      Event(packet, perfetto::TrackEvent::TYPE_SLICE_BEGIN, RequestLane(lane), begin.name);
  *event->add_debug_annotations() = Arg("operation_id", static_cast<int64_t>(begin.operation_id));
  *event->add_debug_annotations() = Arg("tid", record.tid);
  Emit(packet);
}

void PerfettoWriter::EndRequest(const format::Record& record, const format::OperationEnd& end) {
  auto it = request_lanes_.find(end.operation_id);
  if (it == request_lanes_.end()) return;  // not drawn, or begun before the trace
  perfetto::TracePacket packet = Packet(record.time_ns);
  Event(packet, perfetto::TrackEvent::TYPE_SLICE_END, RequestLane(it->second), "");
  Emit(packet);
  lane_busy_[it->second] = false;
  request_lanes_.erase(it);
}

void PerfettoWriter::Finish() {
  timeline_.Finish(last_ns_);
  if (requests_not_drawn_ == 0) return;
  RequestLane(0);  // the parent track, described with the first lane
  perfetto::TracePacket packet = Packet(last_ns_);
  perfetto::TrackEvent* event =
      Event(packet, perfetto::TrackEvent::TYPE_INSTANT, Uuid(kRequestsTrack, 0),
            fmt::format("{} requests not drawn: every lane busy", requests_not_drawn_));
  *event->add_debug_annotations() = Arg("count", static_cast<int64_t>(requests_not_drawn_));
  Emit(packet);
}

void PerfettoWriter::Add(const format::Record& record) {
  using namespace format;
  last_ns_ = std::max(last_ns_, record.time_ns);
  const bool named = threads_.Observe(record);
  timeline_.Add(record, stacks_.Add(record));
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
                 [&](const CpuSample& sample) { Sample(record, sample); },
                 [&](const Loss& loss) { DrawLoss(record, loss); },
                 // Drawn by the timeline's "scheduling" tracks, or only naming tracks.
                 [](const ClockSync&) {}, [](const ProcessInfo&) {}, [](const ProcessFork&) {},
                 [](const ProcessExec&) {}, [](const ThreadExit&) {}, [](const SchedSwitch&) {},
                 [](const SchedWakeup&) {}, [](const SchedMigrate&) {}, [](const OffCpu&) {}},
             record.payload);
}

void PerfettoWriter::DrawSpanBegin(const format::Record& record, const format::SpanBegin& begin) {
  perfetto::TracePacket packet = Packet(record.time_ns);
  perfetto::TrackEvent* event = Event(packet, perfetto::TrackEvent::TYPE_SLICE_BEGIN,
                                      ThreadTrack(record.tid), begin.name);
  *event->add_debug_annotations() = Arg("span_id", static_cast<int64_t>(begin.span_id));
  if (begin.operation_id != 0) {
    *event->add_debug_annotations() = Arg("operation_id", static_cast<int64_t>(begin.operation_id));
  }
  Emit(packet);
}

void PerfettoWriter::DrawSpanEnd(const format::Record& record) {
  perfetto::TracePacket packet = Packet(record.time_ns);
  Event(packet, perfetto::TrackEvent::TYPE_SLICE_END, ThreadTrack(record.tid), "");
  Emit(packet);
}

void PerfettoWriter::DrawInstant(const format::Record& record, const format::Instant& instant) {
  perfetto::TracePacket packet = Packet(record.time_ns);
  perfetto::TrackEvent* event =
      Event(packet, perfetto::TrackEvent::TYPE_INSTANT, ThreadTrack(record.tid), instant.name);
  for (const format::Field& field : instant.fields) {
    *event->add_debug_annotations() = Arg(field.key, field.value);
  }
  Emit(packet);
}

void PerfettoWriter::DrawUsdt(const format::Record& record, const format::UsdtEvent& usdt) {
  perfetto::TracePacket packet = Packet(record.time_ns);
  perfetto::TrackEvent* event =
      Event(packet, perfetto::TrackEvent::TYPE_INSTANT, ThreadTrack(record.tid), usdt.probe);
  for (size_t i = 0; i < usdt.args.size(); ++i) {
    *event->add_debug_annotations() = Arg(fmt::format("arg{}", i), usdt.args[i]);
  }
  if (!usdt.str_arg.empty()) {
    *event->add_debug_annotations() = Arg("str", format::Value::String(usdt.str_arg));
  }
  Emit(packet);
}

void PerfettoWriter::DrawUprobeEntry(const format::Record& record,
                                     const format::UprobeEntry& entry) {
  perfetto::TracePacket packet = Packet(record.time_ns);
  perfetto::TrackEvent* event =
      Event(packet, perfetto::TrackEvent::TYPE_INSTANT,
            ChildTrack(kUprobeTrack, record.tid, "uprobes"), entry.probe);
  for (size_t i = 0; i < entry.args.size(); ++i) {
    *event->add_debug_annotations() = Arg(fmt::format("arg{}", i), entry.args[i]);
  }
  Emit(packet);
}

void PerfettoWriter::DrawUprobeCall(const format::Record& record,
                                    const format::UprobeReturn& ret) {
  const uint64_t time = record.time_ns;
  if (ret.duration_ns == 0 || ret.duration_ns > time) return;  // not paired with its entry
  perfetto::TrackEvent call;
  call.set_name(std::string(ret.probe));
  *call.add_debug_annotations() = Arg("retval", ret.retval);
  Slice(ChildTrack(kUprobeTrack, record.tid, "uprobes"), std::move(call), time - ret.duration_ns,
        time);
}

void PerfettoWriter::DrawCounter(const format::Record& record, const format::Counter& counter) {
  perfetto::TracePacket packet = Packet(record.time_ns);
  perfetto::TrackEvent* event = Event(packet, perfetto::TrackEvent::TYPE_COUNTER,
                                      CounterTrack(threads_.PidOf(record.tid), counter.name), "");
  if (counter.value.type == format::ValueType::kDouble) {
    event->set_double_counter_value(counter.value.AsDouble());
  } else {
    event->set_counter_value(counter.value.AsInt());
  }
  Emit(packet);
}

void PerfettoWriter::DrawLoss(const format::Record& record, const format::Loss& loss) {
  const uint64_t track = Uuid(kLossTrack, 0);
  if (described_.insert(track).second) {
    perfetto::TrackDescriptor descriptor;
    descriptor.set_uuid(track);
    descriptor.set_name("Loupe: losses");
    Descriptor(std::move(descriptor));
  }
  perfetto::TracePacket packet = Packet(record.time_ns);
  perfetto::TrackEvent* event =
      Event(packet, perfetto::TrackEvent::TYPE_INSTANT, track,
            fmt::format("lost {} {} ({})", loss.count, format::LossSourceName(loss.source),
                        format::LossReasonName(loss.reason)));
  *event->add_debug_annotations() = Arg("count", static_cast<int64_t>(loss.count));
  Emit(packet);
}

}  // namespace loupe::analysis
