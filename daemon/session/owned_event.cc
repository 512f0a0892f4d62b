#include "daemon/session/owned_event.h"

#include <variant>

#include "daemon/base/overloaded.h"

namespace loupe::session {

const format::Record& OwnedEvent::View() {
  const auto stacks = [this](auto& kind) {
    kind.user_stack = UserStack();
    kind.kernel_stack = KernelStack();
  };
  std::visit(Overloaded{
                 [&](format::CpuSample& sample) { stacks(sample); },
                 [&](format::OffCpu& off) { stacks(off); },
                 [&](format::ThreadInfo& thread) {
                   thread.name = text;
                   thread.process_name = value_text();
                 },
                 [&](format::ProcessExec& exec) { exec.filename = text; },
                 [&](format::UsdtEvent& usdt) {
                   usdt.args = args();
                   usdt.str_arg = value_text();
                 },
                 [&](format::UprobeEntry& entry) { entry.args = args(); },
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

void OwnedEvent::ViewInstant(format::Instant& instant) {
  instant.name = text;
  if (!extras_) {
    instant.fields = {};
    return;
  }
  std::vector<format::Field>& views = extras_->field_views;
  views.clear();
  for (const OwnedField& field : extras_->fields) {
    views.push_back({field.key, {field.type, field.bits, field.text}});
  }
  instant.fields = views;
}

}  // namespace loupe::session
