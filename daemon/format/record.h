// The records a trace carries, as C++ values. Writers fill them; readers hand
// them out. Strings, stacks, arguments and fields are views: on the writing
// side they only need to live for the Append call, on the reading side they
// stay valid until the reader's next Next().
//
// The numbering mirrors proto/loupe/v1/trace.proto (checked at compile time in
// record.cc); the payload alternatives are listed in RecordKind order so that
// `payload.index() + 1` is the kind.
#ifndef LOUPE_DAEMON_FORMAT_RECORD_H_
#define LOUPE_DAEMON_FORMAT_RECORD_H_

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <variant>

namespace loupe::format {

enum class RecordKind : uint8_t {
  kClockSync = 1,
  kProcessInfo,
  kThreadInfo,
  kProcessFork,
  kProcessExec,
  kThreadExit,
  kSchedSwitch,
  kSchedWakeup,
  kCpuSample,
  kOffCpu,
  kUprobeEntry,
  kUprobeReturn,
  kUsdt,
  kSpanBegin,
  kSpanEnd,
  kInstant,
  kCounter,
  kOperationBegin,
  kOperationEnd,
  kLoss,
  kSchedMigrate,
};
inline constexpr int kMaxRecordKind = static_cast<int>(RecordKind::kSchedMigrate);

// Lower-case name of a kind ("sched_switch"), or "unknown".
std::string_view KindName(RecordKind kind);

enum class ValueType : uint8_t { kInt = 1, kUint, kDouble, kBool, kString, kBytes };

enum class LossSource : uint8_t {
  kSched = 1,
  kCpuSample,
  kUprobe,
  kUsdt,
  kShim,
  kMerge,
  kWriter,
  kShipper,
  kSymbolizer,
};
inline constexpr int kMaxLossSource = static_cast<int>(LossSource::kSymbolizer);

enum class LossReason : uint8_t {
  kRingFull = 1,
  kStackTruncated,
  kStringTruncated,
  kLate,
  kQueueFull,
  kSegmentEvicted,
  kShippingAbandoned,
  kCapReached,
  kWriteFailed,
  kMalformed,
  kUnwindStopped,
  kUnreadable,
};
inline constexpr int kMaxLossReason = static_cast<int>(LossReason::kUnreadable);

// Content cut short rather than events lost: a stack deeper than the cap, a
// string longer than the cap, a stack walk that met a frame that cannot be
// one, a name or value a probe pointed at that could not be read (the event
// is kept, its content marked). Cuts are counted and shown; they do not make
// a trace incomplete.
constexpr bool IsCut(LossReason reason) {
  return reason == LossReason::kStackTruncated || reason == LossReason::kStringTruncated ||
         reason == LossReason::kUnwindStopped || reason == LossReason::kUnreadable;
}

std::string_view LossSourceName(LossSource source);
std::string_view LossReasonName(LossReason reason);

// A typed value of an instant-event field or a counter.
struct Value {
  ValueType type = ValueType::kInt;
  uint64_t bits = 0;      // the number, its IEEE-754 bits, 0/1, or a byte count
  std::string_view text;  // kString only

  static Value Int(int64_t v) { return {ValueType::kInt, static_cast<uint64_t>(v), {}}; }
  static Value Uint(uint64_t v) { return {ValueType::kUint, v, {}}; }
  static Value Double(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return {ValueType::kDouble, bits, {}};
  }
  static Value Bool(bool v) { return {ValueType::kBool, v ? 1u : 0u, {}}; }
  static Value String(std::string_view v) { return {ValueType::kString, 0, v}; }
  static Value Bytes(uint64_t n) { return {ValueType::kBytes, n, {}}; }

  int64_t AsInt() const { return static_cast<int64_t>(bits); }
  double AsDouble() const {
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  bool operator==(const Value&) const = default;
};

struct Field {
  std::string_view key;
  Value value;
  bool operator==(const Field&) const = default;
};

using Stack = std::span<const uint64_t>;  // innermost frame first
// The outermost "frame" of a user stack whose walk stopped before its end
// (a frame that cannot be one, or unwind tables not loaded yet): the
// frames above it are unknown, which readers say rather than show the
// stack as whole. No user or kernel code lives at this address.
inline constexpr uint64_t kUnwindStoppedFrame = 0xffff'ffff'ffff'fffeull;
using Args = std::span<const int64_t>;

// One struct per kind. The record's `tid` is the thread the event happened
// on (for a switch, the one switched out; for a wakeup, the waker).
struct ClockSync {
  uint64_t realtime_ns = 0;  // the record's time is the monotonic side
};
struct ProcessInfo {  // tid = pid
  uint32_t ppid = 0;
  uint32_t ns_pid = 0;
  uint32_t uid = 0;
  uint64_t start_time = 0;
  std::string_view name;
  std::string_view exe;
};
struct ThreadInfo {
  uint32_t pid = 0;
  uint32_t ns_tid = 0;
  std::string_view name;
  // A thread of a process that is not traced, named because it held a CPU
  // that a traced thread waited for; its process's name travels with it.
  bool foreign = false;
  std::string_view process_name;
};
struct ProcessFork {
  uint32_t child_pid = 0;
  uint32_t child_tid = 0;
};
struct ProcessExec {
  uint32_t pid = 0;
  std::string_view filename;
  // The thread that called exec: another than the main thread takes the
  // main thread's tid and is not heard of by its own again. 0: not recorded.
  uint32_t old_tid = 0;
};
struct ThreadExit {
  uint32_t pid = 0;
  int64_t exit_code = 0;  // as passed to exit(), or minus the signal that ended it
  bool group_dead = false;
};
struct SchedSwitch {
  uint32_t next_tid = 0;
  uint32_t prev_state = 0;
};
// The kernel's TASK_DEAD in prev_state: an exited thread's last switch.
inline constexpr uint32_t kTaskDead = 0x80;
// The kernel's __TASK_STOPPED and __TASK_TRACED: stopped by a signal
// (SIGSTOP, SIGTSTP) or by a debugger.
inline constexpr uint32_t kTaskStopped = 0x4, kTaskTraced = 0x8;
// The kernel's TASK_FROZEN (Linux 6.1+): held by the cgroup freezer or a
// system suspend (before 6.1 a frozen thread sleeps in __refrigerator as D).
inline constexpr uint32_t kTaskFrozen = 0x8000;
// In prev_state: a switch the kernel did not report, placed by its own
// accounting of when the next thread began to run (docs/format.md).
inline constexpr uint32_t kSwitchInferred = 1u << 30;
// In prev_state: a preempted thread whose cgroup had spent its CPU quota
// (CFS bandwidth); it waits for the quota to refill, not for a CPU.
inline constexpr uint32_t kSwitchThrottled = 1u << 29;
// The task state the kernel reported, without Loupe's marks: 0 is a
// thread switched out runnable (preempted), not asleep.
inline constexpr uint32_t TaskState(uint32_t prev_state) {
  return prev_state & ~(kSwitchInferred | kSwitchThrottled);
}
// Where a wakeup came from: a task (the record's tid), or an interrupt
// whose record tid is merely the task it interrupted.
enum class WakerContext : uint8_t { kTask = 0, kHardIrq, kSoftIrq, kTimer, kNmi, kUnreported };
inline constexpr int kMaxWakerContext = static_cast<int>(WakerContext::kUnreported);
std::string_view WakerContextName(WakerContext context);  // "task", "hardirq", ...

struct SchedWakeup {
  uint32_t woken_tid = 0;
  uint32_t target_cpu = 0;
  bool is_new = false;
  WakerContext context = WakerContext::kTask;
};
// A traced thread moved to another CPU's run queue (the record's tid is the
// thread moved; its cpu is where the move was observed).
struct SchedMigrate {
  uint32_t orig_cpu = 0;
  uint32_t dest_cpu = 0;
};
struct CpuSample {
  Stack user_stack;
  Stack kernel_stack;
  uint64_t operation_id = 0;  // the shim operation the thread was bound to, 0 = none
};
struct OffCpu {  // the record's time is the switch-in
  uint64_t duration_ns = 0;
  uint64_t runq_ns = 0;
  uint32_t prev_state = 0;
  uint32_t waker_tid = 0;
  Stack user_stack;
  Stack kernel_stack;
  uint64_t operation_id = 0;
};
struct UprobeEntry {
  std::string_view probe;
  Args args;
};
// How a call that did not return was left; the record is where it ended
// (retval means nothing then). Values are the trace's column values.
enum class Unwound : uint8_t {
  kNo = 0,
  kByException = 1,  // timed to where the exception was caught
  kByLongjmp = 2,    // timed to the longjmp
};
inline constexpr uint64_t kMaxUnwound = 2;
struct UprobeReturn {
  std::string_view probe;
  int64_t retval = 0;
  uint64_t duration_ns = 0;
  Unwound unwound = Unwound::kNo;
};
struct UsdtEvent {
  std::string_view probe;  // "provider:name"
  Args args;
  std::string_view str_arg;
};
struct SpanBegin {
  uint64_t span_id = 0;
  uint64_t parent_id = 0;
  uint64_t operation_id = 0;
  std::string_view name;
};
struct SpanEnd {
  uint64_t span_id = 0;
};
struct Instant {
  std::string_view name;
  uint64_t operation_id = 0;
  std::span<const Field> fields;
};
struct Counter {
  std::string_view name;
  Value value;
};
struct OperationBegin {
  uint64_t operation_id = 0;
  std::string_view name;
};
struct OperationEnd {
  uint64_t operation_id = 0;
  // The thread's part ends, not the operation: another thread takes it up
  // by binding the same id (loupe_operation_pass).
  bool passed = false;
};
struct Loss {
  LossSource source = LossSource::kWriter;
  LossReason reason = LossReason::kQueueFull;
  uint64_t count = 0;
};

using Payload =
    std::variant<ClockSync, ProcessInfo, ThreadInfo, ProcessFork, ProcessExec, ThreadExit,
                 SchedSwitch, SchedWakeup, CpuSample, OffCpu, UprobeEntry, UprobeReturn, UsdtEvent,
                 SpanBegin, SpanEnd, Instant, Counter, OperationBegin, OperationEnd, Loss,
                 SchedMigrate>;
static_assert(std::variant_size_v<Payload> == kMaxRecordKind);

struct Record {
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
  uint32_t tid = 0;
  uint32_t cpu = 0;
  Payload payload;

  RecordKind kind() const { return static_cast<RecordKind>(payload.index() + 1); }
};

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_RECORD_H_
