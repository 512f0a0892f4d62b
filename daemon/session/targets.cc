#include "daemon/session/targets.h"

#include <fmt/format.h>

#include "daemon/base/overloaded.h"

namespace loupe::session {

absl::StatusOr<Targets> Targets::Resolve(const std::vector<uint32_t>& pids, uint32_t caller_pid,
                                         uint32_t caller_uid) {
  std::map<uint32_t, ProcessIdentity> processes;
  for (uint32_t named : pids) {
    uint32_t pid = named;
    if (caller_pid != 0) {
      absl::StatusOr<uint32_t> global = GlobalPid(caller_pid, named);
      if (!global.ok()) return global.status();
      pid = *global;
    }
    absl::StatusOr<ProcessIdentity> process = ReadProcess(pid);
    if (!process.ok()) return process.status();
    if (process->kernel_thread || pid == 0) {
      return absl::InvalidArgumentError(fmt::format(
          "pid {} ({}) is a kernel thread: it has no user space to trace", named, process->name));
    }
    if (caller_uid != 0 && process->uid != caller_uid) {
      return absl::PermissionDeniedError(fmt::format(
          "pid {} belongs to uid {}; a caller that is not root (uid {}) may trace only its own "
          "processes",
          named, process->uid, caller_uid));
    }
    processes[pid] = *std::move(process);
  }
  return Targets(std::move(processes));
}

void Targets::Refresh() {
  for (auto it = processes_.begin(); it != processes_.end();) {
    absl::StatusOr<ProcessIdentity> fresh = ReadProcess(it->first);
    if (fresh.ok() && fresh->start_time == it->second.start_time) {
      it->second = *std::move(fresh);
      ++it;
    } else {
      it = processes_.erase(it);
    }
  }
}

std::vector<uint32_t> Targets::pids() const {
  std::vector<uint32_t> out;
  for (const auto& [pid, process] : processes_) out.push_back(pid);
  return out;
}

void Targets::WritePreamble(format::SegmentWriter& writer) const {
  for (const auto& [pid, process] : processes_) {
    writer.AppendPreamble({.tid = pid,
                           .payload = format::ProcessInfo{.ppid = process.ppid,
                                                          .ns_pid = process.ns_pid,
                                                          .uid = process.uid,
                                                          .start_time = process.start_time,
                                                          .name = process.name,
                                                          .exe = process.exe}});
    for (const auto& [tid, thread] : process.threads) {
      writer.AppendPreamble(
          {.tid = tid, .payload = format::ThreadInfo{pid, thread.ns_tid, thread.name}});
    }
  }
}

void Targets::OnFork(const OwnedEvent& event, const format::ProcessFork& fork) {
  const uint32_t parent_tgid = event.prev_tgid;
  if (fork.child_pid == parent_tgid) {  // a new thread
    auto process = processes_.find(parent_tgid);
    if (process == processes_.end()) return;
    ThreadIdentity thread{.tid = fork.child_tid, .ns_tid = fork.child_tid};
    if (auto parent = process->second.threads.find(event.record.tid);
        parent != process->second.threads.end()) {
      thread.name = parent->second.name;
    }
    if (absl::StatusOr<ThreadIdentity> read = ReadThread(fork.child_pid, fork.child_tid);
        read.ok()) {
      thread = *std::move(read);
    }
    process->second.threads[thread.tid] = thread;
    return;
  }
  if (!follow_children_ || !contains(parent_tgid) || contains(fork.child_pid)) return;
  // A child BPF follows too (it may be gone from BPF's map by now).
  if (address_space_changed_) address_space_changed_(fork.child_pid, event.record.time_ns);
  if (absl::StatusOr<ProcessIdentity> child = ReadProcess(fork.child_pid); child.ok()) {
    processes_[fork.child_pid] = *std::move(child);
    return;
  }
  ProcessIdentity known{.pid = fork.child_pid, .ns_pid = fork.child_pid, .ppid = parent_tgid};
  known.threads[fork.child_tid] = {.tid = fork.child_tid, .ns_tid = fork.child_tid};
  processes_[fork.child_pid] = std::move(known);
}

void Targets::Track(OwnedEvent& event) {
  format::Record& record = event.record;
  std::visit(
      Overloaded{
          [&](const format::ProcessFork& fork) { OnFork(event, fork); },
          [&](const format::ThreadExit& exit) {
            auto process = processes_.find(exit.pid);
            if (process == processes_.end()) return;
            process->second.threads.erase(record.tid);
            if (!exit.group_dead) return;
            if (exited_) exited_(process->second, exit.exit_code);
            processes_.erase(process);
          },
          [&](format::ThreadInfo& thread) {
            auto process = processes_.find(thread.pid);
            if (process == processes_.end()) return;
            ThreadIdentity& known = process->second.threads[record.tid];
            known.tid = record.tid;
            known.name = event.text;
            thread.ns_tid = known.ns_tid != 0 ? known.ns_tid : record.tid;
          },
          [&](const format::ProcessExec& exec) {
            if (absl::StatusOr<ProcessIdentity> fresh = ReadProcess(exec.pid); fresh.ok()) {
              processes_[exec.pid] = *std::move(fresh);
            }
            if (address_space_changed_) address_space_changed_(exec.pid, record.time_ns);
          },
          // Scheduling, samples, probes and losses do not change who is traced.
          [](const format::ClockSync&) {}, [](const format::SchedSwitch&) {},
          [](const format::SchedWakeup&) {},
          [](const format::SchedMigrate&) {}, [](const format::CpuSample&) {},
          [](const format::OffCpu&) {}, [](const format::ProcessInfo&) {},
          [](const format::Loss&) {}, [](const format::SpanBegin&) {},
          [](const format::SpanEnd&) {}, [](const format::Counter&) {},
          [](const format::Instant&) {}, [](const format::OperationBegin&) {},
          [](const format::OperationEnd&) {}, [](const format::UsdtEvent&) {},
          [](const format::UprobeEntry&) {}, [](const format::UprobeReturn&) {}},
      record.payload);
}

}  // namespace loupe::session
