#include "daemon/session/targets.h"

#include <fmt/format.h>

#include <algorithm>

#include "daemon/base/overloaded.h"

namespace loupe::session {

absl::StatusOr<Targets> Targets::Resolve(const std::vector<uint32_t>& pids, uint32_t caller_pid,
                                         uint32_t caller_uid, bool descendants) {
  std::map<uint32_t, ProcessIdentity> processes;
  std::vector<std::string> notes;
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> untraced_children;  // (named pid, children)
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
    if (process->tgid != 0 && process->tgid != pid) {
      // A process is traced whole; a thread's number alone would trace nothing.
      return absl::InvalidArgumentError(fmt::format(
          "{} ({}) is a thread of process {}, not a process: attach to {}", named, process->name,
          process->tgid, process->tgid));
    }
    if (process->state == 'Z' || process->state == 'X') {
      return absl::NotFoundError(fmt::format(
          "pid {} ({}) has exited (its parent has not reaped it yet): nothing left to trace",
          named, process->name));
    }
    if (caller_uid != 0 && process->uid != caller_uid) {
      return absl::PermissionDeniedError(fmt::format(
          "pid {} belongs to uid {}; a caller that is not root (uid {}) may trace only its own "
          "processes",
          named, process->uid, caller_uid));
    }
    if (caller_uid != 0 && !process->plain_user) {
      // What ptrace would refuse the caller: a setuid program, or one that
      // made itself undumpable, holds more than its user's rights.
      return absl::PermissionDeniedError(fmt::format(
          "pid {} ({}) runs with rights its user does not have (setuid, or not dumpable); a "
          "caller that is not root (uid {}) may not trace it",
          named, process->name, caller_uid));
    }
    processes[pid] = *std::move(process);
    const std::vector<uint32_t> children = Descendants(pid);
    if (!descendants) {
      untraced_children.emplace_back(named, children);
      continue;
    }
    for (uint32_t child : children) {
      absl::StatusOr<ProcessIdentity> descendant = ReadProcess(child);
      if (!descendant.ok()) continue;  // exited meanwhile
      if (!CallerMayTrace(caller_uid, *descendant)) {
        notes.push_back(fmt::format(
            "descendant {} ({}) of pid {} belongs to uid {}: not traced for uid {}", child,
            descendant->name, named, descendant->uid, caller_uid));
        continue;
      }
      processes[child] = *std::move(descendant);
    }
  }
  // A master that hands its work to child processes (nginx, PostgreSQL, a
  // pre-forking server) sleeps through its trace: say where the work is.
  // Only children the caller may trace are named: louped reads /proc with
  // more rights than a caller has.
  for (const auto& [named, children] : untraced_children) {
    std::vector<std::string> untraced;
    for (uint32_t child : children) {
      if (processes.contains(child)) continue;  // named as well
      absl::StatusOr<ProcessIdentity> descendant = ReadProcess(child);
      if (descendant.ok() && CallerMayTrace(caller_uid, *descendant)) {
        untraced.push_back(fmt::format("{} {}", child, descendant->name));
      }
    }
    if (untraced.empty()) continue;
    constexpr size_t kListed = 4;
    notes.push_back(fmt::format(
        "pid {} has {} child process(es) not traced ({}{}): name them too, or attach with "
        "--follow-children",
        named, untraced.size(),
        fmt::join(untraced.begin(), untraced.begin() + std::min(untraced.size(), kListed), ", "),
        untraced.size() > kListed ? ", …" : ""));
  }
  Targets targets(std::move(processes));
  targets.notes_ = std::move(notes);
  return targets;
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

std::vector<format::Record> Describe(const ProcessIdentity& process, uint64_t time_ns) {
  std::vector<format::Record> records;
  records.push_back({.time_ns = time_ns,
                     .tid = process.pid,
                     .payload = format::ProcessInfo{.ppid = process.ppid,
                                                    .ns_pid = process.ns_pid,
                                                    .uid = process.uid,
                                                    .start_time = process.start_time,
                                                    .name = process.name,
                                                    .exe = process.exe}});
  for (const auto& [tid, thread] : process.threads) {
    records.push_back({.time_ns = time_ns,
                       .tid = tid,
                       .payload = format::ThreadInfo{process.pid, thread.ns_tid, thread.name}});
  }
  return records;
}

void Targets::WritePreamble(format::SegmentWriter& writer) const {
  for (const auto& [pid, process] : processes_) {
    for (const format::Record& record : Describe(process, 0)) writer.AppendPreamble(record);
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
  if (address_space_changed_) {
    address_space_changed_(fork.child_pid, parent_tgid, event.record.time_ns);
  }
  absl::StatusOr<ProcessIdentity> child = ReadProcess(fork.child_pid);
  if (!child.ok()) {
    // Gone already: what the parent was is the best description of it.
    const ProcessIdentity& parent = processes_.at(parent_tgid);
    child = ProcessIdentity{.pid = fork.child_pid,
                            .ns_pid = fork.child_pid,
                            .ppid = parent_tgid,
                            .uid = parent.uid,
                            .name = parent.name,
                            .exe = parent.exe};
    child->threads[fork.child_tid] = {
        .tid = fork.child_tid, .ns_tid = fork.child_tid, .name = parent.name};
  }
  const ProcessIdentity& added = processes_[fork.child_pid] = *std::move(child);
  if (added_) added_(added, event.record.time_ns);
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
            // The main thread's name is the process's (ps, /proc/PID/comm):
            // later segments describe it by its name now.
            if (record.tid == thread.pid) process->second.name = event.text;
            thread.ns_tid = known.ns_tid != 0 ? known.ns_tid : record.tid;
          },
          [&](const format::ProcessExec& exec) {
            if (!contains(exec.pid)) return;
            if (absl::StatusOr<ProcessIdentity> fresh = ReadProcess(exec.pid); fresh.ok()) {
              const ProcessIdentity& now = processes_[exec.pid] = *std::move(fresh);
              if (added_) added_(now, record.time_ns);  // a new name and program
            }
            if (address_space_changed_) address_space_changed_(exec.pid, 0, record.time_ns);
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
