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

// A USDT or uprobe event.
struct ProbeEvent {
  uint32_t tid = 0;
  std::string probe;
  std::vector<int64_t> args;
  std::string text;  // a USDT string argument
};

struct CallReturn {
  uint32_t tid = 0;
  std::string probe;
  int64_t retval = 0;
  uint64_t duration_ns = 0;
};

struct InstantEvent {
  uint32_t tid = 0;
  std::string name;
  uint64_t operation_id = 0;
  std::map<std::string, std::string> fields;  // values as text: "-1", "0.5", "true", "4096 bytes"
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
  std::map<std::string, std::string> config;  // of the first segment's header
  std::set<std::string> notes;                 // the trailers' session notes

  // From probes, in time order.
  std::vector<ProbeEvent> usdt;
  std::vector<ProbeEvent> uprobe_entries;
  std::vector<CallReturn> uprobe_returns;
  std::map<std::string, uint64_t> span_begins;  // by name
  std::set<uint64_t> open_spans;                // begun and not ended
  uint64_t span_ends = 0;
  uint64_t bad_span_parents = 0;  // a parent that was not open on the same thread
  std::vector<InstantEvent> instants;
  std::vector<std::pair<std::string, int64_t>> counters;
  std::map<uint64_t, std::string> operations;  // begun: id -> name
  uint64_t operation_ends = 0;
  std::map<uint32_t, std::map<uint64_t, uint64_t>> sample_operations;  // tid -> operation -> samples
  std::map<uint32_t, uint32_t> forked;  // child pid -> parent pid (processes, not threads)
};

TraceDigest DigestTrace(const std::string& directory);
// Problems and losses, for a failing assertion's message.
std::string WhyIncomplete(const TraceDigest& trace);

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_TRACE_DIGEST_H_
