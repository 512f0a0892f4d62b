#include "analysis/thread_directory.h"

#include <fmt/format.h>

#include <variant>

#include "daemon/base/overloaded.h"

namespace loupe::analysis {

bool ThreadDirectory::Observe(const format::Record& record) {
  using namespace format;
  return std::visit(
      Overloaded{
          [&](const ThreadInfo& thread) { return OnThread(record.tid, thread); },
          [&](const ProcessInfo& process) { return OnProcess(record.tid, process); },
          [&](const ProcessFork& fork) { return OnFork(record.tid, fork); },
          [&](const ProcessExec& exec) { return OnExec(record.tid, exec); },
          // Name no one.
          [](const ClockSync&) { return false; },
          [](const ThreadExit&) { return false; }, [](const SchedSwitch&) { return false; },
          [](const SchedWakeup&) { return false; }, [](const SchedMigrate&) { return false; },
          [](const CpuSample&) { return false; }, [](const OffCpu&) { return false; },
          [](const UprobeEntry&) { return false; }, [](const UprobeReturn&) { return false; },
          [](const UsdtEvent&) { return false; }, [](const SpanBegin&) { return false; },
          [](const SpanEnd&) { return false; }, [](const Instant&) { return false; },
          [](const Counter&) { return false; }, [](const OperationBegin&) { return false; },
          [](const OperationEnd&) { return false; }, [](const Loss&) { return false; }},
      record.payload);
}

bool ThreadDirectory::OnThread(uint32_t tid, const format::ThreadInfo& thread) {
  // A traced thread described as foreign later is one whose process exited
  // first (traces from before louped kept exited targets apart): it stays
  // traced, with its own name.
  if (thread.foreign && described_traced_.contains(tid)) return false;
  pid_of_[tid] = thread.pid;
  if (thread.foreign) {
    foreign_[tid] = std::string(thread.process_name);
  } else {
    foreign_.erase(tid);
    described_traced_.insert(tid);
  }
  std::string& name = thread_names_[tid];
  if (name == thread.name) return false;
  name = std::string(thread.name);
  return true;
}

bool ThreadDirectory::OnProcess(uint32_t pid, const format::ProcessInfo& process) {
  pid_of_[pid] = pid;
  std::string& name = process_names_[pid];
  if (name == process.name) return false;
  name = std::string(process.name);
  return true;
}

bool ThreadDirectory::OnFork(uint32_t parent_tid, const format::ProcessFork& fork) {
  pid_of_[fork.child_tid] = fork.child_pid;
  const uint32_t parent = PidOf(parent_tid);
  if (fork.child_pid != parent && process_names_.contains(parent)) {
    process_names_.try_emplace(fork.child_pid, process_names_[parent]);
  }
  if (auto name = thread_names_.find(parent_tid); name != thread_names_.end()) {
    thread_names_.try_emplace(fork.child_tid, name->second);
  }
  return true;
}

// After an exec the kernel names the process, and its one thread, after
// the program's file (15 bytes of it, as comm holds them).
bool ThreadDirectory::OnExec(uint32_t tid, const format::ProcessExec& exec) {
  const uint32_t pid = exec.pid != 0 ? exec.pid : PidOf(tid);
  const std::string_view file = exec.filename.substr(exec.filename.rfind('/') + 1);
  const std::string name(file.substr(0, 15));
  if (name.empty()) return false;
  process_names_[pid] = name;
  thread_names_[pid] = name;
  pid_of_[pid] = pid;
  return true;
}

uint32_t ThreadDirectory::PidOf(uint32_t tid) const {
  auto it = pid_of_.find(tid);
  return it != pid_of_.end() ? it->second : tid;
}

std::string ThreadDirectory::ProcessName(uint32_t pid) const {
  auto it = process_names_.find(pid);
  return it != process_names_.end() && !it->second.empty() ? it->second
                                                           : fmt::format("pid {}", pid);
}

std::string ThreadDirectory::ProcessNameOf(uint32_t tid) const {
  if (auto it = foreign_.find(tid); it != foreign_.end()) {
    if (!it->second.empty()) return it->second;
    // A process gone before louped read its name: its main thread's name,
    // where the trace has it, is the process's as the kernel's comm gave it.
    if (std::string main = ThreadName(PidOf(tid)); !main.empty()) return main;
    return fmt::format("pid {}", PidOf(tid));
  }
  return ProcessName(PidOf(tid));
}

std::string ThreadDirectory::ThreadName(uint32_t tid) const {
  auto it = thread_names_.find(tid);
  return it != thread_names_.end() ? it->second : "";
}

}  // namespace loupe::analysis
