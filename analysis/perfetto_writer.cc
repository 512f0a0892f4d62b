#include "analysis/perfetto_writer.h"

#include <fmt/format.h>

#include "absl/hash/hash.h"
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
  kOffCpuTrack,
  kUprobeTrack,
  kCounterTrack,
  kOperationTrack,
  kOperationThreadTrack,
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

// What a thread was doing off CPU, from its state at switch-out.
const char* OffCpuName(const format::OffCpu& off) {
  if (off.prev_state == 0) return "preempted";
  if (off.prev_state & 0x1) return "sleeping";
  if (off.prev_state & 0x2) return "blocked (uninterruptible)";
  return "off-CPU";
}

}  // namespace

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

uint64_t PerfettoWriter::OperationTrack(uint64_t operation, std::string_view name) {
  const uint64_t uuid = Uuid(kOperationTrack, absl::HashOf(operation));
  if (described_.insert(uuid).second) {
    operations_[operation].tracks.push_back(uuid);
    perfetto::TrackDescriptor descriptor;
    descriptor.set_uuid(uuid);
    descriptor.set_name(fmt::format("operation {} {}", operation, name));
    Descriptor(std::move(descriptor));
  }
  return uuid;
}

uint64_t PerfettoWriter::OperationThreadTrack(uint64_t operation, uint32_t tid) {
  const uint64_t uuid = Uuid(kOperationThreadTrack, absl::HashOf(operation, tid));
  if (described_.insert(uuid).second) {
    operations_[operation].tracks.push_back(uuid);
    perfetto::TrackDescriptor descriptor;
    descriptor.set_uuid(uuid);
    descriptor.set_parent_uuid(OperationTrack(operation, operations_[operation].name));
    descriptor.set_name(fmt::format("{} {}", threads_.ThreadName(tid), tid));
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

void PerfettoWriter::Slice(uint64_t track, std::string_view name, uint64_t begin_ns,
                           uint64_t end_ns, const std::vector<perfetto::DebugAnnotation>& args) {
  perfetto::TracePacket begin = Packet(begin_ns);
  perfetto::TrackEvent* event = Event(begin, perfetto::TrackEvent::TYPE_SLICE_BEGIN, track, name);
  for (const auto& arg : args) *event->add_debug_annotations() = arg;
  Emit(begin);
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
    for (NamedFrame& frame : names_.Frames(pid, address, kernel)) {
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

void PerfettoWriter::Release(uint64_t operation) {
  auto it = operations_.find(operation);
  if (it == operations_.end() || it->second.open || it->second.open_spans > 0) return;
  for (uint64_t uuid : it->second.tracks) described_.erase(uuid);
  operations_.erase(it);
}

void PerfettoWriter::Add(const format::Record& record) {
  using namespace format;
  using Type = perfetto::TrackEvent;
  if (threads_.Observe(record)) {
    if (std::holds_alternative<ThreadInfo>(record.payload)) ThreadTrack(record.tid, true);
    return;
  }
  const uint64_t time = record.time_ns;
  if (const auto* begin = std::get_if<SpanBegin>(&record.payload)) {
    perfetto::TracePacket packet = Packet(time);
    Type* event = Event(packet, Type::TYPE_SLICE_BEGIN, ThreadTrack(record.tid), begin->name);
    *event->add_debug_annotations() = Arg("span_id", static_cast<int64_t>(begin->span_id));
    if (begin->operation_id != 0) {
      *event->add_debug_annotations() =
          Arg("operation_id", static_cast<int64_t>(begin->operation_id));
    }
    Emit(packet);
    if (begin->operation_id != 0) {
      span_operations_[begin->span_id] = begin->operation_id;
      ++operations_[begin->operation_id].open_spans;
      perfetto::TracePacket in_operation = Packet(time);
      Event(in_operation, Type::TYPE_SLICE_BEGIN,
            OperationThreadTrack(begin->operation_id, record.tid), begin->name);
      Emit(in_operation);
    }
  } else if (const auto* end = std::get_if<SpanEnd>(&record.payload)) {
    perfetto::TracePacket packet = Packet(time);
    Event(packet, Type::TYPE_SLICE_END, ThreadTrack(record.tid), "");
    Emit(packet);
    if (auto operation = span_operations_.find(end->span_id);
        operation != span_operations_.end()) {
      perfetto::TracePacket in_operation = Packet(time);
      Event(in_operation, Type::TYPE_SLICE_END, OperationThreadTrack(operation->second, record.tid),
            "");
      Emit(in_operation);
      --operations_[operation->second].open_spans;
      Release(operation->second);
      span_operations_.erase(operation);
    }
  } else if (const auto* begin_op = std::get_if<OperationBegin>(&record.payload)) {
    Operation& operation = operations_[begin_op->operation_id];
    operation.name = std::string(begin_op->name);
    operation.open = true;
    perfetto::TracePacket packet = Packet(time);
    Type* event = Event(packet, Type::TYPE_SLICE_BEGIN,
                        OperationTrack(begin_op->operation_id, begin_op->name), begin_op->name);
    *event->add_debug_annotations() = Arg("tid", record.tid);
    Emit(packet);
  } else if (const auto* end_op = std::get_if<OperationEnd>(&record.payload)) {
    perfetto::TracePacket packet = Packet(time);
    Operation& operation = operations_[end_op->operation_id];
    Event(packet, Type::TYPE_SLICE_END, OperationTrack(end_op->operation_id, operation.name), "");
    Emit(packet);
    operation.open = false;
    Release(end_op->operation_id);
  } else if (const auto* instant = std::get_if<Instant>(&record.payload)) {
    perfetto::TracePacket packet = Packet(time);
    Type* event = Event(packet, Type::TYPE_INSTANT, ThreadTrack(record.tid), instant->name);
    for (const Field& field : instant->fields) {
      *event->add_debug_annotations() = Arg(field.key, field.value);
    }
    Emit(packet);
  } else if (const auto* usdt = std::get_if<UsdtEvent>(&record.payload)) {
    perfetto::TracePacket packet = Packet(time);
    Type* event = Event(packet, Type::TYPE_INSTANT, ThreadTrack(record.tid), usdt->probe);
    for (size_t i = 0; i < usdt->args.size(); ++i) {
      *event->add_debug_annotations() = Arg(fmt::format("arg{}", i), usdt->args[i]);
    }
    if (!usdt->str_arg.empty()) {
      *event->add_debug_annotations() = Arg("str", Value::String(usdt->str_arg));
    }
    Emit(packet);
  } else if (const auto* entry = std::get_if<UprobeEntry>(&record.payload)) {
    perfetto::TracePacket packet = Packet(time);
    Type* event = Event(packet, Type::TYPE_INSTANT, ChildTrack(kUprobeTrack, record.tid, "uprobes"),
                        entry->probe);
    for (size_t i = 0; i < entry->args.size(); ++i) {
      *event->add_debug_annotations() = Arg(fmt::format("arg{}", i), entry->args[i]);
    }
    Emit(packet);
  } else if (const auto* ret = std::get_if<UprobeReturn>(&record.payload)) {
    if (ret->duration_ns != 0 && ret->duration_ns <= time) {
      Slice(ChildTrack(kUprobeTrack, record.tid, "uprobes"), ret->probe, time - ret->duration_ns,
            time, {Arg("retval", ret->retval)});
    }
  } else if (const auto* counter = std::get_if<Counter>(&record.payload)) {
    perfetto::TracePacket packet = Packet(time);
    Type* event = Event(packet, Type::TYPE_COUNTER,
                        CounterTrack(threads_.PidOf(record.tid), counter->name), "");
    if (counter->value.type == ValueType::kDouble) {
      event->set_double_counter_value(counter->value.AsDouble());
    } else {
      event->set_counter_value(counter->value.AsInt());
    }
    Emit(packet);
  } else if (const auto* off = std::get_if<OffCpu>(&record.payload)) {
    if (off->duration_ns <= time) {
      std::vector<perfetto::DebugAnnotation> args = {
          Arg("runq_ns", static_cast<int64_t>(off->runq_ns)), Arg("waker_tid", off->waker_tid)};
      if (off->operation_id != 0) {
        args.push_back(Arg("operation_id", static_cast<int64_t>(off->operation_id)));
      }
      Slice(ChildTrack(kOffCpuTrack, record.tid, "off-CPU"), OffCpuName(*off),
            time - off->duration_ns, time, args);
    }
  } else if (const auto* sample = std::get_if<CpuSample>(&record.payload)) {
    Sample(record, *sample);
  } else if (const auto* loss = std::get_if<Loss>(&record.payload)) {
    const uint64_t track = Uuid(kLossTrack, 0);
    if (described_.insert(track).second) {
      perfetto::TrackDescriptor descriptor;
      descriptor.set_uuid(track);
      descriptor.set_name("Loupe: losses");
      Descriptor(std::move(descriptor));
    }
    perfetto::TracePacket packet = Packet(time);
    Type* event = Event(packet, Type::TYPE_INSTANT, track,
                        fmt::format("lost {} {} ({})", loss->count, LossSourceName(loss->source),
                                    LossReasonName(loss->reason)));
    *event->add_debug_annotations() = Arg("count", static_cast<int64_t>(loss->count));
    Emit(packet);
  }
}

}  // namespace loupe::analysis
