#include "daemon/session/made_on_cpu.h"

#include <variant>

#include "daemon/base/overloaded.h"

namespace loupe::session {

bool MadeOnCpu(const format::Record& record) {
  using namespace format;
  return std::visit(
      Overloaded{[](const CpuSample&) { return true; }, [](const SpanBegin&) { return true; },
                 [](const SpanEnd&) { return true; }, [](const Instant&) { return true; },
                 [](const Counter&) { return true; }, [](const OperationBegin&) { return true; },
                 [](const OperationEnd&) { return true; }, [](const UsdtEvent&) { return true; },
                 [](const UprobeEntry&) { return true; }, [](const UprobeReturn&) { return true; },
                 [](const ClockSync&) { return false; }, [](const ProcessInfo&) { return false; },
                 [](const ThreadInfo&) { return false; }, [](const ProcessFork&) { return false; },
                 [](const ProcessExec&) { return true; }, [](const ThreadExit&) { return true; },
                 [](const SchedSwitch&) { return false; }, [](const SchedWakeup&) { return false; },
                 [](const SchedMigrate&) { return false; }, [](const OffCpu&) { return false; },
                 [](const Loss&) { return false; }},
      record.payload);
}

uint32_t MakerOf(const format::Record& record) {
  const auto* exec = std::get_if<format::ProcessExec>(&record.payload);
  return exec != nullptr ? exec->old_tid : record.tid;
}

}  // namespace loupe::session
