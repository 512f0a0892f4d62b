// Who is who in a trace, followed as records stream by: the process of each
// thread (preamble thread_info, new threads from forks), the names of
// processes and threads, and which threads are traced rather than foreign
// (of another process, named only because they held a CPU a traced thread
// waited for).
#ifndef LOUPE_ANALYSIS_THREAD_DIRECTORY_H_
#define LOUPE_ANALYSIS_THREAD_DIRECTORY_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "daemon/format/record.h"

namespace loupe::analysis {

class ThreadDirectory {
 public:
  // Feed every record; true when it named a thread or process (anew).
  bool Observe(const format::Record& record);
  uint32_t PidOf(uint32_t tid) const;  // the tid itself when unknown
  bool Known(uint32_t tid) const { return pid_of_.contains(tid); }
  // Known and not foreign: its switches, wakeups and samples are all in the trace.
  bool Traced(uint32_t tid) const {
    return tid != 0 && Known(tid) && (foreign_.empty() || !foreign_.contains(tid));
  }
  bool Foreign(uint32_t tid) const { return foreign_.contains(tid); }
  std::string ProcessName(uint32_t pid) const;  // "pid N" when unknown
  std::string ThreadName(uint32_t tid) const;   // "" when unknown
  // The process of a thread by name, foreign ones included.
  std::string ProcessNameOf(uint32_t tid) const;

 private:
  // Each true when it named anew.
  bool OnThread(uint32_t tid, const format::ThreadInfo& thread);
  bool OnProcess(uint32_t pid, const format::ProcessInfo& process);
  bool OnFork(uint32_t parent_tid, const format::ProcessFork& fork);
  bool OnExec(uint32_t tid, const format::ProcessExec& exec);

  // Looked up per event: hash maps.
  absl::flat_hash_map<uint32_t, uint32_t> pid_of_;
  std::map<uint32_t, std::string> process_names_;
  std::map<uint32_t, std::string> thread_names_;
  absl::flat_hash_map<uint32_t, std::string> foreign_;  // tid -> its process's name
  // Described by the tracer as one of its targets' threads (not merely
  // forked by one: a child it does not follow is foreign).
  absl::flat_hash_set<uint32_t> described_traced_;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_THREAD_DIRECTORY_H_
