// The parts of a trace the daemon tests check, read into plain values.
#ifndef LOUPE_TESTS_SUPPORT_TRACE_DIGEST_H_
#define LOUPE_TESTS_SUPPORT_TRACE_DIGEST_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace loupe::testing {

struct OffCpuInterval {
  uint64_t end_ns = 0;
  uint64_t duration_ns = 0;
  uint64_t runq_ns = 0;
  uint32_t prev_state = 0;
  size_t user_depth = 0;
  size_t kernel_depth = 0;
};

struct TraceDigest {
  bool readable = false;
  bool complete = false;
  std::vector<std::string> problems;
  uint64_t records = 0;
  std::map<std::string, uint64_t> kinds;
  std::map<uint32_t, uint64_t> switch_outs;                             // by tid
  std::map<uint32_t, std::vector<OffCpuInterval>> off_cpu;              // by tid
  std::map<uint32_t, std::vector<std::vector<uint64_t>>> user_samples;  // by tid
  std::map<uint32_t, uint32_t> thread_pid;                    // tid -> pid, from thread_info
  std::map<uint32_t, std::vector<std::string>> thread_names;  // in order
  std::set<uint32_t> processes;                               // process_info pids
  std::map<uint32_t, uint32_t> process_ns_pid;
  std::set<uint32_t> sample_tids;
  std::vector<std::pair<uint32_t, uint32_t>> switches;  // (prev, next)
  std::set<uint32_t> exited_processes;                  // thread_exit with group_dead
  std::map<std::string, uint64_t> losses;               // "source/reason"
  bool time_ordered = true;
};

TraceDigest DigestTrace(const std::string& directory);
// Problems and losses, for a failing assertion's message.
std::string WhyIncomplete(const TraceDigest& trace);

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_TRACE_DIGEST_H_
