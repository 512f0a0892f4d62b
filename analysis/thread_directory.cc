#include "analysis/thread_directory.h"

#include <fmt/format.h>

namespace loupe::analysis {

bool ThreadDirectory::Observe(const format::Record& record) {
  using namespace format;
  if (const auto* thread = std::get_if<ThreadInfo>(&record.payload)) {
    pid_of_[record.tid] = thread->pid;
    if (thread->foreign) {
      foreign_[record.tid] = std::string(thread->process_name);
    } else {
      foreign_.erase(record.tid);
    }
    std::string& name = thread_names_[record.tid];
    if (name == thread->name) return false;
    name = std::string(thread->name);
    return true;
  }
  if (const auto* process = std::get_if<ProcessInfo>(&record.payload)) {
    pid_of_[record.tid] = record.tid;
    std::string& name = process_names_[record.tid];
    if (name == process->name) return false;
    name = std::string(process->name);
    return true;
  }
  if (const auto* fork = std::get_if<ProcessFork>(&record.payload)) {
    pid_of_[fork->child_tid] = fork->child_pid;
    const uint32_t parent = PidOf(record.tid);
    if (fork->child_pid != parent && process_names_.contains(parent)) {
      process_names_.try_emplace(fork->child_pid, process_names_[parent]);
    }
    if (auto name = thread_names_.find(record.tid); name != thread_names_.end()) {
      thread_names_.try_emplace(fork->child_tid, name->second);
    }
    return true;
  }
  return false;
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
    return it->second.empty() ? fmt::format("pid {}", PidOf(tid)) : it->second;
  }
  return ProcessName(PidOf(tid));
}

std::string ThreadDirectory::ThreadName(uint32_t tid) const {
  auto it = thread_names_.find(tid);
  return it != thread_names_.end() ? it->second : "";
}

}  // namespace loupe::analysis
