#include "daemon/session/bpf_record_decoder.h"

#include <cstring>

#include "shared/records.h"

namespace loupe::session {
namespace {

// The kernel keeps a wait status (exit(1) is 256); the trace keeps what a
// shell shows: the code passed to exit, or minus the signal that killed it.
int64_t ExitCode(int32_t wait_status) {
  const int32_t signal = wait_status & 0x7f;
  return signal == 0 ? (wait_status >> 8) & 0xff : -signal;
}

// Copies only the fixed part: a record with stacks is up to 2 KiB, and its
// frames are read straight from the ring bytes by TakeStacks.
template <typename T>
bool Load(std::span<const uint8_t> bytes, size_t fixed_part, T* out) {
  if (bytes.size() < fixed_part || bytes.size() > sizeof(T)) return false;
  std::memcpy(out, bytes.data(), fixed_part);
  return true;
}

std::string_view CString(const char* text, size_t max) { return {text, strnlen(text, max)}; }

// Lowest and highest address a user frame can have (the first page is never
// mapped; above 47 bits is kernel or non-canonical with 4-level paging).
constexpr uint64_t kLowestUserAddress = 4096;
constexpr uint64_t kHighestUserAddress = 0x00007fffffffffff;

// Stacks follow the fixed part: user frames, then kernel frames. A walk
// from unwind tables was checked frame by frame in BPF and says where it
// stopped; it marks the frames a signal interrupted (exact addresses, not
// return addresses). A frame pointer walk through code built without frame
// pointers reads whatever lies on the stack: it is cut here at the first
// address that cannot be a user frame, rather than keeping junk (and running
// to the depth cap).
bool TakeStacks(std::span<const uint8_t> bytes, size_t fixed_part, uint16_t user, uint16_t kernel,
                uint32_t stack_flags, OwnedEvent* event) {
  const size_t count = size_t{user} + kernel;
  if (count > (bytes.size() - fixed_part) / sizeof(uint64_t)) return false;
  if (user > LOUPE_MAX_STACK_DEPTH || kernel > LOUPE_MAX_STACK_DEPTH) return false;
  if ((stack_flags & LOUPE_STACK_UNWIND_STOPPED) != 0) event->unwind_stopped = true;
  event->frames.resize(count);
  if (count == 0) return true;  // (memcpy may not be given an empty vector's null data)
  std::memcpy(event->frames.data(), bytes.data() + fixed_part, count * sizeof(uint64_t));
  if ((stack_flags & LOUPE_STACK_CFI) != 0) {
    for (uint16_t i = 0; i < user; ++i) {
      if ((event->frames[i] & LOUPE_FRAME_EXACT) == 0) continue;
      event->frames[i] &= ~LOUPE_FRAME_EXACT;
      event->extras().exact_frames.push_back(i);
    }
  }
  uint16_t valid = 0;
  while (valid < user && event->frames[valid] >= kLowestUserAddress &&
         event->frames[valid] <= kHighestUserAddress) {
    ++valid;
  }
  if (valid < user) {
    event->frames.erase(event->frames.begin() + valid, event->frames.begin() + user);
    event->unwind_stopped = true;
  }
  // Marked after the frames kept (none kept: a kernel-only stack stays one).
  if (event->unwind_stopped && valid > 0) {
    event->frames.insert(event->frames.begin() + valid, format::kUnwindStoppedFrame);
    ++valid;
  }
  event->user_depth = valid;
  return true;
}

}  // namespace

bool DecodeBpfRecord(std::span<const uint8_t> bytes, OwnedEvent* event) {
  loupe_record_header header;
  event->Clear();
  if (bytes.size() < sizeof header) return false;
  std::memcpy(&header, bytes.data(), sizeof header);
  event->record.time_ns = header.time_ns;
  event->record.cpu = header.cpu;

  switch (header.type) {
    case LOUPE_REC_SCHED_SWITCH: {
      static_assert(LOUPE_SWITCH_THROTTLED == format::kSwitchThrottled,
                    "the mark travels into the trace as it is");
      static_assert(LOUPE_TASK_DEAD == format::kTaskDead, "the kernel's state, as it is");
      loupe_sched_switch r;
      const size_t fixed = offsetof(loupe_sched_switch, frames);
      if (!Load(bytes, fixed, &r)) return false;
      if (!TakeStacks(bytes, fixed, r.user_depth, r.kernel_depth, r.stack_flags, event)) {
        return false;
      }
      event->record.tid = r.prev_tid;
      event->record.payload = format::SchedSwitch{r.next_tid, r.prev_state};
      event->prev_tgid = r.prev_tgid;
      event->next_tgid = r.next_tgid;
      event->prev_ran_ns = r.prev_ran_ns;
      event->prev_run_delay_ns = r.prev_run_delay_ns;
      // Most switches are between targets: no name, no allocation.
      if (r.prev_comm[0] != '\0') event->prev_comm.Assign(CString(r.prev_comm, sizeof r.prev_comm));
      if (r.next_comm[0] != '\0') event->next_comm.Assign(CString(r.next_comm, sizeof r.next_comm));
      return true;
    }
    case LOUPE_REC_SCHED_WAKEUP: {
      loupe_sched_wakeup r;
      if (!Load(bytes, sizeof r, &r)) return false;
      // Unreported is louped's own (MissedWakeups), never BPF's.
      if (r.context > LOUPE_WAKER_NMI) return false;
      event->record.tid = r.waker_tid;
      event->record.payload = format::SchedWakeup{r.woken_tid, r.target_cpu, r.is_new != 0,
                                                 static_cast<format::WakerContext>(r.context)};
      event->next_tgid = r.woken_tgid;
      event->prev_tgid = r.waker_tgid;
      if (r.waker_comm[0] != '\0') {
        event->prev_comm.Assign(CString(r.waker_comm, sizeof r.waker_comm));
      }
      return true;
    }
    case LOUPE_REC_SCHED_MIGRATE: {
      loupe_sched_migrate r;
      if (!Load(bytes, sizeof r, &r)) return false;
      event->record.tid = r.tid;
      event->record.payload = format::SchedMigrate{r.orig_cpu, r.dest_cpu};
      event->prev_tgid = r.tgid;
      return true;
    }
    case LOUPE_REC_PROCESS_FORK: {
      loupe_process_fork r;
      if (!Load(bytes, sizeof r, &r)) return false;
      event->record.tid = r.parent_tid;
      event->record.payload = format::ProcessFork{r.child_tgid, r.child_tid};
      event->prev_tgid = r.parent_tgid;
      event->next_tgid = r.child_tgid;
      return true;
    }
    case LOUPE_REC_PROCESS_EXEC: {
      loupe_process_exec r;
      if (!Load(bytes, sizeof r, &r)) return false;
      event->record.tid = r.tid;
      event->text.assign(CString(r.filename, sizeof r.filename));
      event->record.payload = format::ProcessExec{.pid = r.tgid, .old_tid = r.old_tid};
      event->prev_ran_ns = r.ran_ns;
      return true;
    }
    case LOUPE_REC_THREAD_EXIT: {
      loupe_thread_exit r;
      if (!Load(bytes, sizeof r, &r)) return false;
      event->record.tid = r.tid;
      event->record.payload = format::ThreadExit{r.tgid, ExitCode(r.exit_code), r.group_dead != 0};
      return true;
    }
    case LOUPE_REC_THREAD_NAME: {
      loupe_thread_name r;
      if (!Load(bytes, sizeof r, &r)) return false;
      event->record.tid = r.tid;
      event->text.assign(CString(r.comm, sizeof r.comm));
      event->record.payload = format::ThreadInfo{.pid = r.tgid, .ns_tid = 0};
      return true;
    }
    case LOUPE_REC_CPU_SAMPLE: {
      loupe_cpu_sample r;
      const size_t fixed = offsetof(loupe_cpu_sample, frames);
      if (!Load(bytes, fixed, &r)) return false;
      if (!TakeStacks(bytes, fixed, r.user_depth, r.kernel_depth, r.stack_flags, event)) {
        return false;
      }
      event->record.tid = r.tid;
      event->record.payload = format::CpuSample{};
      event->prev_tgid = r.tgid;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace loupe::session
