// An event that owns its stacks and text, so it can wait in the reorder
// buffer after the ring-buffer record it came from is gone. View() gives
// the format::Record, with views into this object.
#ifndef LOUPE_DAEMON_SESSION_OWNED_EVENT_H_
#define LOUPE_DAEMON_SESSION_OWNED_EVENT_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "daemon/base/overloaded.h"
#include "daemon/format/record.h"

namespace loupe::session {

// A field of an instant event with its key and text owned.
struct OwnedField {
  std::string key;
  format::ValueType type = format::ValueType::kInt;
  uint64_t bits = 0;
  std::string text;
};

struct OwnedEvent {
  format::Record record;         // views are set by View()
  std::vector<uint64_t> frames;  // user frames, then kernel frames
  uint16_t user_depth = 0;
  // The user stack walk met an address no user frame can have; the frames
  // from there on were dropped.
  bool unwind_stopped = false;
  // User frames (by index) whose address is where the code was, not a
  // return address: those a signal interrupted. The leaf always is.
  std::vector<uint16_t> exact_frames;
  std::string text;  // a name or a path
  std::string value_text;         // a USDT string argument, a foreign thread's process name
  std::vector<int64_t> args;      // of a USDT or uprobe event
  std::vector<OwnedField> fields;  // of an instant event
  std::vector<format::Field> field_views;
  // For switches: the processes on both sides (targets are decided by tgid).
  uint32_t prev_tgid = 0;
  uint32_t next_tgid = 0;
  // For switches: the names of sides that are not targets (empty otherwise).
  std::string prev_comm;
  std::string next_comm;

  // Empties every member above for the next event, keeping their buffers:
  // a reorder slot decoded into again allocates nothing for its stacks,
  // names or fields. A new member must be reset here too.
  void Clear() {
    record = {};
    frames.clear();
    user_depth = 0;
    unwind_stopped = false;
    exact_frames.clear();
    text.clear();
    value_text.clear();
    args.clear();
    fields.clear();
    field_views.clear();
    prev_tgid = 0;
    next_tgid = 0;
    prev_comm.clear();
    next_comm.clear();
  }

  format::Stack UserStack() const { return {frames.data(), user_depth}; }
  format::Stack KernelStack() const {
    return {frames.data() + user_depth, frames.size() - user_depth};
  }

  const format::Record& View() {
    const auto stacks = [this](auto& kind) {
      kind.user_stack = UserStack();
      kind.kernel_stack = KernelStack();
    };
    std::visit(Overloaded{
                   [&](format::CpuSample& sample) { stacks(sample); },
                   [&](format::OffCpu& off) { stacks(off); },
                   [&](format::ThreadInfo& thread) {
                     thread.name = text;
                     thread.process_name = value_text;
                   },
                   [&](format::ProcessExec& exec) { exec.filename = text; },
                   [&](format::UsdtEvent& usdt) {
                     usdt.args = args;
                     usdt.str_arg = value_text;
                   },
                   [&](format::UprobeEntry& entry) { entry.args = args; },
                   [&](format::SpanBegin& span) { span.name = text; },
                   [&](format::Counter& counter) { counter.name = text; },
                   [&](format::OperationBegin& operation) { operation.name = text; },
                   [&](format::Instant& instant) { ViewInstant(instant); },
                   // Nothing owned here to point at.
                   [](format::ClockSync&) {}, [](format::ProcessInfo&) {},
                   [](format::ProcessFork&) {}, [](format::ThreadExit&) {},
                   [](format::SchedSwitch&) {}, [](format::SchedWakeup&) {},
                   [](format::SchedMigrate&) {}, [](format::UprobeReturn&) {},
                   [](format::SpanEnd&) {}, [](format::OperationEnd&) {},
                   [](format::Loss&) {}},
               record.payload);
    return record;
  }

  void ViewInstant(format::Instant& instant) {
    instant.name = text;
    field_views.clear();
    for (const OwnedField& field : fields) {
      field_views.push_back({field.key, {field.type, field.bits, field.text}});
    }
    instant.fields = field_views;
  }
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_OWNED_EVENT_H_
