#include "daemon/format/block_decoder.h"

#include <fmt/format.h>

namespace loupe::format {
namespace {

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(fmt::format("corrupt event block: {}", what));
}

}  // namespace

absl::Status BlockDecoder::Start(std::string_view block) {
  failed_ = false;
  remaining_ = 0;
  for (Column* column : {&kinds_, &time_deltas_, &tids_, &cpus_}) column->Reset();
  for (auto& group : columns_) {
    for (Column& column : group) column.Reset();
  }
  context_.Reset();
  status_ = ParseLayout(block);
  return status_;
}

absl::Status BlockDecoder::ParseLayout(std::string_view block) {
  wire::Cursor cursor(block);
  uint64_t base_time = 0, event_count = 0, first_string_id = 0, first_stack_id = 0;
  coding_ = layout::kCoding1;
  time_low_bytes_ = {};
  uint64_t string_count = 0, string_bytes = 0;
  std::string_view depths, deltas;

  while (!cursor.empty()) {
    uint64_t tag;
    if (!cursor.ReadVarint(&tag)) return Corrupt("unreadable field tag");
    const uint64_t field = tag >> 3;
    const uint32_t type = tag & 7;
    const bool is_varint = type == wire::kVarint;
    const bool is_bytes = type == wire::kLengthDelimited;
    std::string_view bytes;
    auto read_bytes = [&](Column* column) {
      if (!is_bytes || !cursor.ReadLengthDelimited(&bytes)) return false;
      if (column != nullptr) column->Reset(bytes);
      return true;
    };
    bool ok = true;
    switch (field) {
      case layout::kBaseTime:
        ok = is_varint && cursor.ReadVarint(&base_time);
        break;
      case layout::kEventCount:
        ok = is_varint && cursor.ReadVarint(&event_count);
        break;
      case layout::kFirstStringId:
        ok = is_varint && cursor.ReadVarint(&first_string_id);
        break;
      case layout::kCoding:
        ok = is_varint && cursor.ReadVarint(&coding_);
        if (ok && (coding_ < layout::kCoding1 || coding_ > layout::kCoding3)) {
          return Corrupt(fmt::format("coding {}; this reader knows {}..{}", coding_,
                                     layout::kCoding1, layout::kCoding3));
        }
        break;
      case layout::kTimeLowBytes:
        ok = read_bytes(nullptr);
        time_low_bytes_ = bytes;
        break;
      case layout::kFirstStackId:
        ok = is_varint && cursor.ReadVarint(&first_stack_id);
        break;
      case layout::kStrings:  // counted now, added once the whole block is checked
        ok = read_bytes(nullptr);
        if (ok && bytes.size() > layout::kMaxStringBytes) {
          return Corrupt(fmt::format("a string of {} bytes, over the format's {}", bytes.size(),
                                     layout::kMaxStringBytes));
        }
        ++string_count;
        string_bytes += bytes.size();
        break;
      case layout::kStackDepths:
        ok = read_bytes(nullptr);
        depths = bytes;
        break;
      case layout::kStackFrameDeltas:
        ok = read_bytes(nullptr);
        deltas = bytes;
        break;
      case layout::kKinds:
        ok = read_bytes(&kinds_);
        break;
      case layout::kTimeDeltas:
        ok = read_bytes(&time_deltas_);
        break;
      case layout::kTids:
        ok = read_bytes(&tids_);
        break;
      case layout::kCpus:
        ok = read_bytes(&cpus_);
        break;
      default:
        if (field > layout::kGroupFieldBase && field <= layout::kGroupFieldBase + kMaxRecordKind) {
          ok = read_bytes(nullptr);
          if (ok) {
            absl::Status status = ParseGroup(field - layout::kGroupFieldBase, bytes);
            if (!status.ok()) return status;
          }
        } else {
          ok = cursor.Skip(type);  // a field from a newer writer (or the frame number)
        }
    }
    if (!ok) return Corrupt(fmt::format("field {} is malformed or cut short", field));
  }

  if (string_count > 0 && first_string_id != tables_->string_count() + 1) {
    return Corrupt(fmt::format("block defines strings from id {} but the segment has {}",
                               first_string_id, tables_->string_count()));
  }
  if (!depths.empty() && first_stack_id != tables_->stack_count() + 1) {
    return Corrupt(fmt::format("block defines stacks from id {} but the segment has {}",
                               first_stack_id, tables_->stack_count()));
  }
  // Every count is held to what the block can really hold before anything is
  // allocated: an event takes at least a byte of each common column, a stack
  // frame at least a byte of the frame column.
  if (event_count > UINT32_MAX || event_count > kinds_.size()) {
    return Corrupt(fmt::format("{} events but the kind column holds at most {}", event_count,
                               kinds_.size()));
  }
  // Coding 2 and later split each time delta: one byte per event in its own plane.
  if (coding_ == layout::kCoding1 ? !time_low_bytes_.empty()
                                  : time_low_bytes_.size() != event_count) {
    return Corrupt(fmt::format("{} bytes of time low bytes for {} events in coding {}",
                               time_low_bytes_.size(), event_count, coding_));
  }
  uint64_t stack_count = 0, frame_count = 0;
  wire::Cursor depth_cursor(depths);
  while (!depth_cursor.empty()) {
    uint64_t depth;
    if (!depth_cursor.ReadVarint(&depth) || depth == 0 || depth > layout::kMaxStackDepth) {
      return Corrupt("stack depth out of range");
    }
    ++stack_count;
    frame_count += depth;
  }
  if (frame_count > deltas.size()) {
    return Corrupt(fmt::format("stacks of {} frames but the frame column holds at most {}",
                               frame_count, deltas.size()));
  }
  const uint64_t cost = InternTables::Cost(string_count, string_bytes, stack_count, frame_count);
  if (tables_->bytes() > tables_->limit() || cost > tables_->limit() - tables_->bytes()) {
    return absl::DataLossError(fmt::format(
        "damaged: event block defines {} strings and {} stacks taking {} bytes; with the {} "
        "bytes before them that is over the reader's bound of {} for this segment",
        string_count, stack_count, cost, tables_->bytes(), tables_->limit()));
  }

  AddStrings(block);
  if (absl::Status status = DefineStacks(depths, deltas); !status.ok()) return status;

  remaining_ = static_cast<uint32_t>(event_count);
  event_index_ = 0;
  time_ns_ = base_time;
  cpu_ = 0;
  return absl::OkStatus();
}

// The second walk over a block already checked: its strings, in order.
void BlockDecoder::AddStrings(std::string_view block) {
  wire::Cursor cursor(block);
  while (!cursor.empty()) {
    uint64_t tag;
    if (!cursor.ReadVarint(&tag)) return;
    std::string_view bytes;
    if ((tag >> 3) == layout::kStrings && (tag & 7) == wire::kLengthDelimited) {
      if (!cursor.ReadLengthDelimited(&bytes)) return;
      tables_->AddString(bytes);
    } else if (!cursor.Skip(tag & 7)) {
      return;
    }
  }
}

absl::Status BlockDecoder::ParseGroup(uint32_t kind, std::string_view group) {
  wire::Cursor cursor(group);
  while (!cursor.empty()) {
    uint64_t tag;
    std::string_view bytes;
    if (!cursor.ReadVarint(&tag)) return Corrupt(fmt::format("group {}: bad tag", kind));
    const uint64_t field = tag >> 3;
    const uint32_t type = tag & 7;
    if (field >= 1 && field <= layout::kMaxColumnsPerKind && type == wire::kLengthDelimited) {
      if (!cursor.ReadLengthDelimited(&bytes)) {
        return Corrupt(fmt::format("group {}: column {} cut short", kind, field));
      }
      columns_[kind][field - 1].Reset(bytes);
    } else if (!cursor.Skip(type)) {
      return Corrupt(fmt::format("group {}: field {} malformed", kind, field));
    }
  }
  return absl::OkStatus();
}

absl::Status BlockDecoder::DefineStacks(std::string_view depths, std::string_view deltas) {
  wire::Cursor depth_cursor(depths), delta_cursor(deltas);
  while (!depth_cursor.empty()) {
    uint64_t depth;
    if (!depth_cursor.ReadVarint(&depth) || depth == 0 || depth > layout::kMaxStackDepth) {
      return Corrupt("stack depth out of range");
    }
    scratch_frames_.clear();
    uint64_t frame = 0;
    for (uint64_t i = 0; i < depth; ++i) {
      uint64_t delta;
      if (!delta_cursor.ReadVarint(&delta)) return Corrupt("stack frames end early");
      frame += static_cast<uint64_t>(wire::UnZigZag(delta));
      scratch_frames_.push_back(frame);
    }
    tables_->AddStack(scratch_frames_.begin(), scratch_frames_.end());
  }
  if (!delta_cursor.empty()) return Corrupt("stack frames left over");
  return absl::OkStatus();
}

bool BlockDecoder::Fail(absl::Status status) {
  status_ = std::move(status);
  remaining_ = 0;
  return false;
}

bool BlockDecoder::Next(Record* record) {
  while (remaining_ > 0) {
    --remaining_;
    bool failed = false;
    uint64_t kind = kinds_.U(&failed);
    if (coding_ < layout::kCoding3 || (kind & 1) != 0) cpu_ = cpus_.U32(&failed);
    if (coding_ >= layout::kCoding3) kind >>= 1;  // the flag: a changed cpu follows
    const uint32_t cpu = cpu_;
    uint64_t delta = time_deltas_.U(&failed);
    if (coding_ != layout::kCoding1) {
      // Checked in ParseLayout: one low byte per event.
      if (delta >> 56 != 0) failed = true;
      delta = delta << 8 | static_cast<uint8_t>(time_low_bytes_[event_index_++]);
    }
    const uint64_t tid_code = tids_.U(&failed);
    if (failed) return Fail(Corrupt("common columns end before event_count events"));
    const uint32_t* running = context_.RunningTid(cpu);
    if (tid_code > uint64_t{UINT32_MAX} + 1 || (tid_code == 0 && running == nullptr)) {
      return Fail(Corrupt("tid out of range"));
    }
    const uint32_t tid = tid_code == 0 ? *running : static_cast<uint32_t>(tid_code - 1);
    time_ns_ += static_cast<uint64_t>(wire::UnZigZag(delta));
    if (kind == 0) return Fail(Corrupt("event of kind 0"));
    if (kind > static_cast<uint64_t>(kMaxRecordKind)) {
      ++skipped_unknown_;  // its columns live in a group this reader ignores
      continue;
    }
    record->time_ns = time_ns_;
    record->tid = tid;
    record->cpu = cpu;
    failed_ = false;
    if (!DecodePayload(static_cast<RecordKind>(kind), record) || failed_) {
      return Fail(
          Corrupt(fmt::format("{} event: a column ends early or names an undefined string or stack",
                              KindName(static_cast<RecordKind>(kind)))));
    }
    context_.Observe(*record);
    return true;
  }
  return false;
}

std::string_view BlockDecoder::Str(Column& column) {
  std::string_view text;
  if (!tables_->FindString(column.U(&failed_), &text)) failed_ = true;
  return text;
}

Stack BlockDecoder::StackOf(Column& column) {
  Stack stack;
  if (!tables_->FindStack(column.U(&failed_), &stack)) failed_ = true;
  return stack;
}

Value BlockDecoder::ReadValue(Column& types, Column& values) {
  Value value;
  const uint64_t type = types.U(&failed_);
  if (type < static_cast<uint64_t>(ValueType::kInt) ||
      type > static_cast<uint64_t>(ValueType::kBytes)) {
    failed_ = true;
    return value;
  }
  value.type = static_cast<ValueType>(type);
  switch (value.type) {
    case ValueType::kInt:
      value.bits = static_cast<uint64_t>(values.S(&failed_));
      break;
    case ValueType::kString:
      value.text = Str(values);
      break;
    default:
      value.bits = values.U(&failed_);
      break;
  }
  return value;
}

uint64_t BlockDecoder::Operation(Column& column, uint32_t tid) {
  if (coding_ == layout::kCoding1) return column.D(&failed_);
  return column.Residual(context_.PredictOperation(tid), &failed_);
}

// Mirrors BlockEncoder::PayloadEncoder column for column; coding 1 as it
// was written before predictions.
bool BlockDecoder::DecodePayload(RecordKind kind, Record* record) {
  auto& c = columns_[static_cast<int>(kind)];
  bool* f = &failed_;
  const bool coding1 = coding_ == layout::kCoding1;
  auto read_args = [&](Column& counts, Column& values) {
    const uint64_t count = counts.U(f);
    if (count > layout::kMaxArgs) return false;
    args_.clear();
    for (uint64_t i = 0; i < count; ++i) args_.push_back(values.S(f));
    return true;
  };
  switch (kind) {
    case RecordKind::kClockSync:
      record->payload = ClockSync{c[0].U(f)};
      return true;
    case RecordKind::kProcessInfo: {
      ProcessInfo r;
      r.ppid = c[0].U32(f);
      r.ns_pid = c[1].U32(f);
      r.uid = c[2].U32(f);
      r.start_time = c[3].U(f);
      r.name = Str(c[4]);
      r.exe = Str(c[5]);
      record->payload = r;
      return true;
    }
    case RecordKind::kThreadInfo: {
      ThreadInfo r;
      r.pid = c[0].U32(f);
      r.ns_tid = c[1].U32(f);
      r.name = Str(c[2]);
      r.foreign = c[3].Added(f) != 0;
      if (r.foreign) r.process_name = Str(c[4]);
      record->payload = r;
      return true;
    }
    case RecordKind::kProcessFork:
      record->payload = ProcessFork{c[0].U32(f), c[1].U32(f)};
      return true;
    case RecordKind::kProcessExec: {
      ProcessExec r;
      r.pid = c[0].U32(f);
      r.filename = Str(c[1]);
      r.old_tid = static_cast<uint32_t>(c[2].Added(f));
      record->payload = r;
      return true;
    }
    case RecordKind::kThreadExit: {
      ThreadExit r;
      r.pid = c[0].U32(f);
      r.exit_code = c[1].S(f);
      r.group_dead = c[2].U(f) != 0;
      record->payload = r;
      return true;
    }
    case RecordKind::kSchedSwitch: {
      SchedSwitch r;
      r.next_tid = coding1 ? c[0].U32(f) : c[0].Predicted(context_.WokenOnto(record->cpu), f);
      r.prev_state = c[1].U32(f);
      record->payload = r;
      return true;
    }
    case RecordKind::kSchedWakeup: {
      SchedWakeup r;
      r.woken_tid = c[0].U32(f);
      r.target_cpu = coding_ < layout::kCoding3 ? c[1].U32(f) : c[1].Predicted(record->cpu, f);
      r.is_new = c[2].U(f) != 0;
      const uint64_t context = c[3].Added(f);
      if (context > static_cast<uint64_t>(kMaxWakerContext)) return false;
      r.context = static_cast<WakerContext>(context);
      record->payload = r;
      return true;
    }
    case RecordKind::kSchedMigrate:
      record->payload = SchedMigrate{c[0].U32(f), c[1].U32(f)};
      return true;
    case RecordKind::kCpuSample: {
      CpuSample r;
      r.user_stack = StackOf(c[0]);
      r.kernel_stack = StackOf(c[1]);
      r.operation_id = Operation(c[2], record->tid);
      record->payload = r;
      return true;
    }
    case RecordKind::kOffCpu: {
      OffCpu r;
      if (coding1) {
        r.duration_ns = c[0].U(f);
        r.runq_ns = c[1].U(f);
        r.prev_state = c[2].U32(f);
        r.waker_tid = c[3].U32(f);
      } else {
        const OffCpu predicted = context_.PredictOffCpu(record->tid, record->time_ns);
        r.duration_ns = c[0].Residual(predicted.duration_ns, f);
        r.runq_ns = c[1].Residual(predicted.runq_ns, f);
        r.prev_state = c[2].Predicted(predicted.prev_state, f);
        r.waker_tid = c[3].Predicted(predicted.waker_tid, f);
      }
      r.user_stack = StackOf(c[4]);
      r.kernel_stack = StackOf(c[5]);
      r.operation_id = Operation(c[6], record->tid);
      record->payload = r;
      return true;
    }
    case RecordKind::kUprobeEntry: {
      UprobeEntry r;
      r.probe = Str(c[0]);
      if (!read_args(c[1], c[2])) return false;
      r.args = args_;
      record->payload = r;
      return true;
    }
    case RecordKind::kUprobeReturn: {
      UprobeReturn r;
      r.probe = Str(c[0]);
      r.retval = c[1].S(f);
      r.duration_ns = c[2].U(f);
      const uint64_t unwound = c[3].Added(f);
      if (unwound > kMaxUnwound) return false;
      r.unwound = static_cast<Unwound>(unwound);
      record->payload = r;
      return true;
    }
    case RecordKind::kUsdt: {
      UsdtEvent r;
      r.probe = Str(c[0]);
      if (!read_args(c[1], c[2])) return false;
      r.args = args_;
      r.str_arg = Str(c[3]);
      record->payload = r;
      return true;
    }
    case RecordKind::kSpanBegin: {
      SpanBegin r;
      r.span_id = c[0].D(f);
      const uint64_t parent = static_cast<uint64_t>(c[1].S(f));
      r.parent_id = coding1 ? r.span_id - parent
                            : ParentFromCode(r.span_id, parent, context_.PredictSpan(record->tid));
      r.operation_id = Operation(c[2], record->tid);
      r.name = Str(c[3]);
      record->payload = r;
      return true;
    }
    case RecordKind::kSpanEnd:
      record->payload = SpanEnd{coding1 ? c[0].D(f)
                                        : c[0].Residual(context_.PredictSpan(record->tid), f)};
      return true;
    case RecordKind::kInstant: {
      Instant r;
      r.name = Str(c[0]);
      r.operation_id = Operation(c[1], record->tid);
      const uint64_t count = c[2].U(f);
      if (count > layout::kMaxFields) return false;
      fields_.clear();
      for (uint64_t i = 0; i < count; ++i) {
        Field field;
        field.key = Str(c[3]);
        field.value = ReadValue(c[4], c[5]);
        fields_.push_back(field);
      }
      r.fields = fields_;
      record->payload = r;
      return true;
    }
    case RecordKind::kCounter: {
      Counter r;
      r.name = Str(c[0]);
      r.value = ReadValue(c[1], c[2]);
      record->payload = r;
      return true;
    }
    case RecordKind::kOperationBegin: {
      OperationBegin r;
      r.operation_id =
          coding1 ? c[0].D(f) : c[0].Residual(context_.PredictNextOperation(record->tid), f);
      r.name = Str(c[1]);
      record->payload = r;
      return true;
    }
    case RecordKind::kOperationEnd:
      record->payload = OperationEnd{Operation(c[0], record->tid), c[1].Added(f) != 0};
      return true;
    case RecordKind::kLoss: {
      const uint64_t source = c[0].U(f);
      const uint64_t reason = c[1].U(f);
      if (source == 0 || source > kMaxLossSource || reason == 0 || reason > kMaxLossReason) {
        return false;
      }
      record->payload =
          Loss{static_cast<LossSource>(source), static_cast<LossReason>(reason), c[2].U(f)};
      return true;
    }
  }
  return false;
}

}  // namespace loupe::format
