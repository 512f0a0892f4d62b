#include "tests/support/every_kind.h"

namespace loupe::testing {
namespace {

using namespace format;

const uint64_t kUserFrames[] = {0x55d4a2c01234, 0x55d4a2c05678, 0x7f3b1e200010};
const uint64_t kKernelFrames[] = {0xffffffff81234567, 0xffffffff81000010};
const int64_t kArgs[] = {-1, 0, 42, INT64_MIN, INT64_MAX};
const Field kFields[] = {
    {"status", Value::Int(-500)},       {"count", Value::Uint(UINT64_MAX)},
    {"ratio", Value::Double(0.25)},     {"ok", Value::Bool(true)},
    {"path", Value::String("/a\"b\n")}, {"payload", Value::Bytes(4096)},
};

}  // namespace

std::vector<Record> EveryKind(uint64_t start_ns) {
  const Payload payloads[] = {
      ClockSync{1'700'000'000'123'456'789},
      ProcessInfo{.ppid = 1,
                  .ns_pid = 7,
                  .uid = 1000,
                  .start_time = 12345,
                  .name = "server",
                  .exe = "/usr/bin/server"},
      ThreadInfo{.pid = 4000, .ns_tid = 8, .name = "worker-1"},
      ProcessFork{.child_pid = 4100, .child_tid = 4100},
      ProcessExec{.pid = 4100, .filename = "/bin/true", .old_tid = 4102},
      ThreadExit{.pid = 4100, .exit_code = -9, .group_dead = true},
      SchedSwitch{.next_tid = 4002, .prev_state = 2},
      SchedWakeup{.woken_tid = 4001, .target_cpu = 3, .is_new = true,
                  .context = WakerContext::kTimer},
      CpuSample{.user_stack = kUserFrames, .kernel_stack = kKernelFrames, .operation_id = 9001},
      OffCpu{.duration_ns = 2'000'000,
             .runq_ns = 15'000,
             .prev_state = 1,
             .waker_tid = 4002,
             .user_stack = kUserFrames,
             .kernel_stack = kKernelFrames,
             .operation_id = 9001},
      UprobeEntry{.probe = "libc:malloc", .args = kArgs},
      UprobeReturn{.probe = "libc:malloc", .retval = -12, .duration_ns = 850},
      UsdtEvent{.probe = "postgresql:query__start", .args = kArgs, .str_arg = "SELECT 1"},
      SpanBegin{.span_id = 77, .parent_id = 76, .operation_id = 0xdeadbeefcafe, .name = "query"},
      SpanEnd{.span_id = 77},
      Instant{.name = "response", .operation_id = 0xdeadbeefcafe, .fields = kFields},
      Counter{.name = "queue_depth", .value = Value::Double(3.5)},
      OperationBegin{.operation_id = 0xdeadbeefcafe, .name = "GET /index"},
      OperationEnd{.operation_id = 0xdeadbeefcafe},
      Loss{.source = LossSource::kSched, .reason = LossReason::kRingFull, .count = 17},
      SchedMigrate{.orig_cpu = 1, .dest_cpu = 0},
  };
  std::vector<Record> records;
  uint32_t tid = 4000;
  for (const Payload& payload : payloads) {
    records.push_back(Record{.time_ns = start_ns + records.size() * 1000,
                             .tid = tid++,
                             .cpu = static_cast<uint32_t>(records.size() % 3),
                             .payload = payload});
  }
  return records;
}

}  // namespace loupe::testing
