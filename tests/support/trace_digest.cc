#include "tests/support/trace_digest.h"

#include <fmt/format.h>

#include "daemon/format/trace_reader.h"

namespace loupe::testing {

TraceDigest DigestTrace(const std::string& directory) {
  using namespace format;
  TraceDigest digest;
  auto trace = TraceReader::Open({directory});
  if (!trace.ok()) {
    digest.problems.push_back(trace.status().ToString());
    return digest;
  }
  digest.readable = true;
  Record record;
  uint64_t last = 0;
  while ((*trace)->Next(&record)) {
    ++digest.records;
    ++digest.kinds[std::string(KindName(record.kind()))];
    if (record.time_ns < last) digest.time_ordered = false;
    last = record.time_ns;
    if (const auto* change = std::get_if<SchedSwitch>(&record.payload)) {
      ++digest.switch_outs[record.tid];
      digest.switches.emplace_back(record.tid, change->next_tid);
    } else if (const auto* off = std::get_if<OffCpu>(&record.payload)) {
      digest.off_cpu[record.tid].push_back({record.time_ns, off->duration_ns, off->runq_ns,
                                            off->prev_state, off->user_stack.size(),
                                            off->kernel_stack.size()});
    } else if (const auto* sample = std::get_if<CpuSample>(&record.payload)) {
      digest.sample_tids.insert(record.tid);
      digest.user_samples[record.tid].emplace_back(sample->user_stack.begin(),
                                                   sample->user_stack.end());
    } else if (const auto* thread = std::get_if<ThreadInfo>(&record.payload)) {
      digest.thread_pid[record.tid] = thread->pid;
      digest.thread_names[record.tid].emplace_back(thread->name);
    } else if (const auto* process = std::get_if<ProcessInfo>(&record.payload)) {
      digest.processes.insert(record.tid);
      digest.process_ns_pid[record.tid] = process->ns_pid;
    } else if (const auto* exit = std::get_if<ThreadExit>(&record.payload)) {
      if (exit->group_dead) digest.exited_processes.insert(exit->pid);
    } else if (const auto* loss = std::get_if<Loss>(&record.payload)) {
      digest.losses[fmt::format("{}/{}", LossSourceName(loss->source),
                                LossReasonName(loss->reason))] += loss->count;
    }
  }
  digest.complete = true;
  for (const SegmentSummary& summary : (*trace)->summaries()) {
    digest.complete = digest.complete && summary.complete;
    digest.problems.insert(digest.problems.end(), summary.problems.begin(), summary.problems.end());
  }
  return digest;
}

std::string WhyIncomplete(const TraceDigest& trace) {
  std::string why;
  for (const std::string& problem : trace.problems) why += problem + "; ";
  for (const auto& [what, count] : trace.losses) why += fmt::format("lost {} {}; ", count, what);
  return why;
}

}  // namespace loupe::testing
