#include "daemon/format/block_encoder.h"

#include <algorithm>

#include "absl/hash/hash.h"

namespace loupe::format {

using layout::kMaxColumnsPerKind;

size_t BlockEncoder::StackHash::operator()(Stack frames) const {
  return absl::HashOf(absl::MakeSpan(frames.data(), frames.size()));
}

bool BlockEncoder::StackEq::operator()(Stack a, Stack b) const {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

namespace {

// A value its prediction usually gets right: 0 when it does, else value + 1.
void PutPredicted(VarintColumn* column, uint32_t value, uint32_t predicted) {
  column->Put(value == predicted ? 0 : uint64_t{value} + 1);
}

// The difference to a prediction, for values a prediction comes close to.
void PutResidual(VarintColumn* column, uint64_t value, uint64_t predicted) {
  column->PutSigned(static_cast<int64_t>(value - predicted));
}

}  // namespace

// Writes each payload kind into its own column group. The column order here
// is the field order of the kind's *Columns message in trace.proto, and
// block_decoder.cc reads them back in the same order. Predictions come from
// the events before this one (e->context_).
struct BlockEncoder::PayloadEncoder {
  BlockEncoder* e;
  const Record& record;

  void PutOperation(VarintColumn* column, uint64_t operation_id) {
    PutResidual(column, operation_id, e->context_.PredictOperation(record.tid));
  }

  void operator()(const ClockSync& r) { e->Group(RecordKind::kClockSync)[0].Put(r.realtime_ns); }
  void operator()(const ProcessInfo& r) {
    VarintColumn* c = e->Group(RecordKind::kProcessInfo);
    c[0].Put(r.ppid);
    c[1].Put(r.ns_pid);
    c[2].Put(r.uid);
    c[3].Put(r.start_time);
    c[4].Put(e->InternString(r.name));
    c[5].Put(e->InternString(r.exe));
  }
  void operator()(const ThreadInfo& r) {
    VarintColumn* c = e->Group(RecordKind::kThreadInfo);
    c[0].Put(r.pid);
    c[1].Put(r.ns_tid);
    c[2].Put(e->InternString(r.name));
    c[3].Put(r.foreign);
    if (r.foreign) c[4].Put(e->InternString(r.process_name));  // only foreign threads have one
  }
  void operator()(const ProcessFork& r) {
    VarintColumn* c = e->Group(RecordKind::kProcessFork);
    c[0].Put(r.child_pid);
    c[1].Put(r.child_tid);
  }
  void operator()(const ProcessExec& r) {
    VarintColumn* c = e->Group(RecordKind::kProcessExec);
    c[0].Put(r.pid);
    c[1].Put(e->InternString(r.filename));
    c[2].Put(r.old_tid);
  }
  void operator()(const ThreadExit& r) {
    VarintColumn* c = e->Group(RecordKind::kThreadExit);
    c[0].Put(r.pid);
    c[1].PutSigned(r.exit_code);
    c[2].Put(r.group_dead);
  }
  void operator()(const SchedSwitch& r) {
    VarintColumn* c = e->Group(RecordKind::kSchedSwitch);
    PutPredicted(&c[0], r.next_tid, e->context_.WokenOnto(record.cpu));
    c[1].Put(r.prev_state);
  }
  void operator()(const SchedWakeup& r) {
    VarintColumn* c = e->Group(RecordKind::kSchedWakeup);
    c[0].Put(r.woken_tid);
    PutPredicted(&c[1], r.target_cpu, record.cpu);
    c[2].Put(r.is_new);
    c[3].Put(static_cast<uint32_t>(r.context));
  }
  void operator()(const SchedMigrate& r) {
    VarintColumn* c = e->Group(RecordKind::kSchedMigrate);
    c[0].Put(r.orig_cpu);
    c[1].Put(r.dest_cpu);
  }
  void operator()(const CpuSample& r) {
    VarintColumn* c = e->Group(RecordKind::kCpuSample);
    c[0].Put(e->InternStack(r.user_stack));
    c[1].Put(e->InternStack(r.kernel_stack));
    PutOperation(&c[2], r.operation_id);
  }
  void operator()(const OffCpu& r) {
    VarintColumn* c = e->Group(RecordKind::kOffCpu);
    const OffCpu predicted = e->context_.PredictOffCpu(record.tid, record.time_ns);
    PutResidual(&c[0], r.duration_ns, predicted.duration_ns);
    PutResidual(&c[1], r.runq_ns, predicted.runq_ns);
    PutPredicted(&c[2], r.prev_state, predicted.prev_state);
    PutPredicted(&c[3], r.waker_tid, predicted.waker_tid);
    c[4].Put(e->InternStack(r.user_stack));
    c[5].Put(e->InternStack(r.kernel_stack));
    PutResidual(&c[6], r.operation_id, predicted.operation_id);
  }
  void operator()(const UprobeEntry& r) {
    VarintColumn* c = e->Group(RecordKind::kUprobeEntry);
    c[0].Put(e->InternString(r.probe));
    PutArgs(r.args, &c[1], &c[2]);
  }
  void operator()(const UprobeReturn& r) {
    VarintColumn* c = e->Group(RecordKind::kUprobeReturn);
    c[0].Put(e->InternString(r.probe));
    c[1].PutSigned(r.retval);
    c[2].Put(r.duration_ns);
    c[3].Put(static_cast<uint64_t>(r.unwound));
  }
  void operator()(const UsdtEvent& r) {
    VarintColumn* c = e->Group(RecordKind::kUsdt);
    c[0].Put(e->InternString(r.probe));
    PutArgs(r.args, &c[1], &c[2]);
    c[3].Put(e->InternString(r.str_arg));
  }
  void operator()(const SpanBegin& r) {
    VarintColumn* c = e->Group(RecordKind::kSpanBegin);
    c[0].PutDelta(r.span_id);
    const uint64_t open = e->context_.PredictSpan(record.tid);
    c[1].PutSigned(static_cast<int64_t>(ParentCode(r.span_id, r.parent_id, open)));
    PutOperation(&c[2], r.operation_id);
    c[3].Put(e->InternString(r.name));
  }
  void operator()(const SpanEnd& r) {
    PutResidual(&e->Group(RecordKind::kSpanEnd)[0], r.span_id, e->context_.PredictSpan(record.tid));
  }
  void operator()(const Instant& r) {
    VarintColumn* c = e->Group(RecordKind::kInstant);
    c[0].Put(e->InternString(r.name));
    PutOperation(&c[1], r.operation_id);
    const size_t count = Capped(r.fields.size(), layout::kMaxFields);
    c[2].Put(count);
    for (size_t i = 0; i < count; ++i) {
      c[3].Put(e->InternString(r.fields[i].key));
      e->PutValue(&c[4], &c[5], r.fields[i].value);
    }
  }
  void operator()(const Counter& r) {
    VarintColumn* c = e->Group(RecordKind::kCounter);
    c[0].Put(e->InternString(r.name));
    e->PutValue(&c[1], &c[2], r.value);
  }
  void operator()(const OperationBegin& r) {
    VarintColumn* c = e->Group(RecordKind::kOperationBegin);
    PutResidual(&c[0], r.operation_id, e->context_.PredictNextOperation(record.tid));
    c[1].Put(e->InternString(r.name));
  }
  void operator()(const OperationEnd& r) {
    VarintColumn* c = e->Group(RecordKind::kOperationEnd);
    PutOperation(&c[0], r.operation_id);
    c[1].Put(r.passed);
  }
  void operator()(const Loss& r) {
    VarintColumn* c = e->Group(RecordKind::kLoss);
    c[0].Put(static_cast<uint32_t>(r.source));
    c[1].Put(static_cast<uint32_t>(r.reason));
    c[2].Put(r.count);
  }

  size_t Capped(size_t n, size_t cap) {
    if (n <= cap) return n;
    ++e->truncations_.lists;
    return cap;
  }
  void PutArgs(Args args, VarintColumn* count_column, VarintColumn* value_column) {
    const size_t count = Capped(args.size(), layout::kMaxArgs);
    count_column->Put(count);
    for (size_t i = 0; i < count; ++i) value_column->PutSigned(args[i]);
  }
};

void BlockEncoder::Append(const Record& record) {
  if (event_count_ == 0) {
    base_time_ns_ = record.time_ns;
    last_time_ns_ = record.time_ns;
  }
  // Events come in runs on one cpu: a flag in the kind's value (which has
  // bits to spare, where a column of its own would cost a bit per event)
  // says whether the cpu changed, and only a changed cpu is written.
  const bool cpu_changed = record.cpu != cpu_;
  kinds_.Put(uint64_t{static_cast<uint32_t>(record.kind())} << 1 | cpu_changed);
  if (cpu_changed) cpus_.Put(record.cpu);
  cpu_ = record.cpu;
  // Unsigned subtraction then a signed view: correct for any two uint64 times,
  // including time going backwards.
  const uint64_t delta = wire::ZigZag(static_cast<int64_t>(record.time_ns - last_time_ns_));
  time_low_bytes_.push_back(static_cast<char>(delta & 0xff));
  time_deltas_.Put(delta >> 8);
  last_time_ns_ = record.time_ns;
  // Most events happen on the thread the CPU last switched to; those cost a 0.
  const uint32_t* running = context_.RunningTid(record.cpu);
  tids_.Put(running != nullptr && *running == record.tid ? 0 : uint64_t{record.tid} + 1);
  std::visit(PayloadEncoder{this, record}, record.payload);
  context_.Observe(record);
  ++event_count_;
}

void BlockEncoder::PutValue(VarintColumn* type_column, VarintColumn* value_column,
                            const Value& value) {
  type_column->Put(static_cast<uint32_t>(value.type));
  switch (value.type) {
    case ValueType::kInt:
      value_column->PutSigned(value.AsInt());
      break;
    case ValueType::kString:
      value_column->Put(InternString(value.text));
      break;
    default:
      value_column->Put(value.bits);
      break;
  }
}

uint32_t BlockEncoder::InternString(std::string_view text) {
  if (text.empty()) return 0;
  if (text.size() > layout::kMaxStringBytes) {
    ++truncations_.strings;
    text = text.substr(0, layout::kMaxStringBytes);
  }
  auto it = string_ids_.find(text);
  if (it != string_ids_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(string_ids_.size()) + 1;
  string_ids_.emplace(std::string(text), id);
  wire::AppendBytesField(&new_strings_, layout::kStrings, text);
  return id;
}

uint32_t BlockEncoder::InternStack(Stack frames) {
  if (frames.empty()) return 0;
  if (frames.size() > layout::kMaxStackDepth) {
    ++truncations_.stacks;
    frames = frames.first(layout::kMaxStackDepth);
  }
  auto it = stack_ids_.find(frames);
  if (it != stack_ids_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(stack_ids_.size()) + 1;
  stack_ids_.emplace(std::vector<uint64_t>(frames.begin(), frames.end()), id);
  stack_depths_.Put(frames.size());
  uint64_t previous = 0;
  for (uint64_t frame : frames) {
    stack_frame_deltas_.PutSigned(static_cast<int64_t>(frame - previous));
    previous = frame;
  }
  return id;
}

size_t BlockEncoder::GroupSize(int kind) const {
  size_t size = 0;
  for (int c = 0; c < kMaxColumnsPerKind; ++c) {
    const VarintColumn& column = columns_[kind][c];
    if (!column.empty()) size += wire::BytesFieldSize(c + 1, column.size());
  }
  return size;
}

size_t BlockEncoder::pending_bytes() const {
  size_t size = new_strings_.size() + time_low_bytes_.size() + stack_depths_.size() + stack_frame_deltas_.size() +
                kinds_.size() + time_deltas_.size() + tids_.size() + cpus_.size();
  for (int kind = 1; kind <= kMaxRecordKind; ++kind) {
    for (const VarintColumn& column : columns_[kind]) size += column.size();
  }
  return size;
}

void BlockEncoder::FinishBlock(std::string* frame, uint64_t frame_number) {
  std::string block;
  block.reserve(pending_bytes() + 64 + 16 * kMaxRecordKind);
  // First, so that a reader finds it without walking the block.
  if (frame_number != 0) wire::AppendVarintField(&block, layout::kFrameNumber, frame_number);
  wire::AppendVarintField(&block, layout::kCoding, layout::kCoding3);
  wire::AppendVarintField(&block, layout::kBaseTime, base_time_ns_);
  wire::AppendVarintField(&block, layout::kEventCount, event_count_);
  wire::AppendVarintField(&block, layout::kFirstStringId, first_string_id_);
  column_starts_.clear();
  column_starts_.push_back(block.size());  // the strings, as one column
  block += new_strings_;
  wire::AppendVarintField(&block, layout::kFirstStackId, first_stack_id_);
  auto append_column = [&](uint32_t field, std::string_view bytes) {
    column_starts_.push_back(block.size());
    wire::AppendBytesField(&block, field, bytes);
  };
  if (!time_low_bytes_.empty()) append_column(layout::kTimeLowBytes, time_low_bytes_);
  const std::pair<uint32_t, const VarintColumn*> common[] = {
      {layout::kStackDepths, &stack_depths_},
      {layout::kStackFrameDeltas, &stack_frame_deltas_},
      {layout::kKinds, &kinds_},
      {layout::kTimeDeltas, &time_deltas_},
      {layout::kTids, &tids_},
      {layout::kCpus, &cpus_},
  };
  for (const auto& [field, column] : common) {
    if (!column->empty()) append_column(field, column->bytes());
  }
  for (int kind = 1; kind <= kMaxRecordKind; ++kind) {
    const size_t group_size = GroupSize(kind);
    if (group_size == 0) continue;
    wire::AppendVarint(&block, wire::Tag(layout::GroupField(static_cast<RecordKind>(kind)),
                                         wire::kLengthDelimited));
    wire::AppendVarint(&block, group_size);
    for (int c = 0; c < kMaxColumnsPerKind; ++c) {
      const VarintColumn& column = columns_[kind][c];
      if (!column.empty()) append_column(c + 1, column.bytes());
    }
  }

  frame->clear();
  wire::AppendBytesField(frame, layout::kFrameEvents, block);
  // Offsets into the frame, past the field that wraps the block.
  for (size_t& start : column_starts_) start += frame->size() - block.size();

  // The next block defines what is interned from here on.
  last_first_string_id_ = first_string_id_;
  last_first_stack_id_ = first_stack_id_;
  last_block_truncations_ = block_truncations_;
  block_truncations_ = truncations_;
  first_string_id_ = static_cast<uint32_t>(string_ids_.size()) + 1;
  first_stack_id_ = static_cast<uint32_t>(stack_ids_.size()) + 1;
  new_strings_.clear();
  time_low_bytes_.clear();
  cpu_ = 0;
  event_count_ = 0;
  context_.Reset();
  for (VarintColumn* column :
       {&stack_depths_, &stack_frame_deltas_, &kinds_, &time_deltas_, &tids_, &cpus_}) {
    column->Clear();
  }
  for (auto& group : columns_) {
    for (VarintColumn& column : group) column.Clear();
  }
}

void BlockEncoder::ForgetLastBlock() {
  // Ids are handed out in order, so the block's own are those from its first.
  for (auto it = string_ids_.begin(); it != string_ids_.end();) {
    if (it->second >= last_first_string_id_) {
      string_ids_.erase(it++);
    } else {
      ++it;
    }
  }
  for (auto it = stack_ids_.begin(); it != stack_ids_.end();) {
    if (it->second >= last_first_stack_id_) {
      stack_ids_.erase(it++);
    } else {
      ++it;
    }
  }
  first_string_id_ = last_first_string_id_;
  first_stack_id_ = last_first_stack_id_;
  truncations_ = last_block_truncations_;
  block_truncations_ = truncations_;
}

void BlockEncoder::StartSegment() {
  string_ids_.clear();
  stack_ids_.clear();
  first_string_id_ = 1;
  first_stack_id_ = 1;
}

}  // namespace loupe::format
