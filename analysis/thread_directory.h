// Who is who in a trace, followed as records stream by: the process of each
// thread (preamble thread_info, new threads from forks) and the names of
// processes and threads.
#ifndef LOUPE_TOOLS_TRACECTL_THREAD_DIRECTORY_H_
#define LOUPE_TOOLS_TRACECTL_THREAD_DIRECTORY_H_

#include <cstdint>
#include <map>
#include <string>

#include "daemon/format/record.h"

namespace loupe::tracectl {

class ThreadDirectory {
 public:
  // Feed every record; true when it named a thread or process (anew).
  bool Observe(const format::Record& record);
  uint32_t PidOf(uint32_t tid) const;  // the tid itself when unknown
  bool Known(uint32_t tid) const { return pid_of_.contains(tid); }
  std::string ProcessName(uint32_t pid) const;  // "pid N" when unknown
  std::string ThreadName(uint32_t tid) const;   // "" when unknown

 private:
  std::map<uint32_t, uint32_t> pid_of_;
  std::map<uint32_t, std::string> process_names_;
  std::map<uint32_t, std::string> thread_names_;
};

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_THREAD_DIRECTORY_H_
