#include "tests/support/trace_digest.h"

#include <fmt/format.h>

#include "daemon/format/trace_reader.h"

namespace loupe::testing {
namespace {

std::string ValueText(const format::Value& value) {
  switch (value.type) {
    case format::ValueType::kInt:
      return std::to_string(value.AsInt());
    case format::ValueType::kUint:
      return std::to_string(value.bits);
    case format::ValueType::kDouble:
      return fmt::format("{}", value.AsDouble());
    case format::ValueType::kBool:
      return value.bits != 0 ? "true" : "false";
    case format::ValueType::kString:
      return std::string(value.text);
    case format::ValueType::kBytes:
      return fmt::format("{} bytes", value.bits);
  }
  return "?";
}

// Spans, events, counters, operations, USDT and uprobe events.
void DigestProbeRecord(const format::Record& record, TraceDigest& digest,
                       std::map<uint32_t, std::vector<uint64_t>>& span_stacks) {
  using namespace format;
  if (const auto* usdt = std::get_if<UsdtEvent>(&record.payload)) {
    digest.usdt.push_back({record.tid, std::string(usdt->probe),
                           std::vector<int64_t>(usdt->args.begin(), usdt->args.end()),
                           std::string(usdt->str_arg)});
  } else if (const auto* entry = std::get_if<UprobeEntry>(&record.payload)) {
    digest.uprobe_entries.push_back({record.tid, std::string(entry->probe),
                                     std::vector<int64_t>(entry->args.begin(), entry->args.end()),
                                     ""});
  } else if (const auto* ret = std::get_if<UprobeReturn>(&record.payload)) {
    digest.uprobe_returns.push_back(
        {record.tid, std::string(ret->probe), ret->retval, ret->duration_ns});
  } else if (const auto* begin = std::get_if<SpanBegin>(&record.payload)) {
    ++digest.span_begins[std::string(begin->name)];
    std::vector<uint64_t>& stack = span_stacks[record.tid];
    const uint64_t expected_parent = stack.empty() ? 0 : stack.back();
    if (begin->parent_id != expected_parent) ++digest.bad_span_parents;
    stack.push_back(begin->span_id);
    digest.open_spans.insert(begin->span_id);
  } else if (const auto* end = std::get_if<SpanEnd>(&record.payload)) {
    ++digest.span_ends;
    digest.open_spans.erase(end->span_id);
    std::vector<uint64_t>& stack = span_stacks[record.tid];
    if (!stack.empty() && stack.back() == end->span_id) stack.pop_back();
  } else if (const auto* instant = std::get_if<Instant>(&record.payload)) {
    InstantEvent seen{record.tid, std::string(instant->name), instant->operation_id, {}};
    for (const Field& field : instant->fields) {
      seen.fields[std::string(field.key)] = ValueText(field.value);
    }
    digest.instants.push_back(std::move(seen));
  } else if (const auto* counter = std::get_if<Counter>(&record.payload)) {
    digest.counters.emplace_back(std::string(counter->name), counter->value.AsInt());
  } else if (const auto* operation = std::get_if<OperationBegin>(&record.payload)) {
    digest.operations[operation->operation_id] = std::string(operation->name);
  } else if (std::holds_alternative<OperationEnd>(record.payload)) {
    ++digest.operation_ends;
  }
}

}  // namespace

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
  std::map<uint32_t, std::vector<uint64_t>> span_stacks;
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
      ++digest.sample_operations[record.tid][sample->operation_id];
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
    } else if (const auto* fork = std::get_if<ProcessFork>(&record.payload)) {
      if (fork->child_pid == fork->child_tid && digest.thread_pid.contains(record.tid)) {
        digest.forked[fork->child_pid] = digest.thread_pid[record.tid];
      }
    } else {
      DigestProbeRecord(record, digest, span_stacks);
    }
  }
  const auto& summaries = (*trace)->summaries();
  if (!summaries.empty()) {
    for (const auto& [key, value] : summaries.front().header.config()) digest.config[key] = value;
  }
  digest.complete = true;
  for (const SegmentSummary& summary : (*trace)->summaries()) {
    digest.complete = digest.complete && summary.complete;
    digest.problems.insert(digest.problems.end(), summary.problems.begin(), summary.problems.end());
    if (summary.has_trailer) digest.notes.insert(summary.trailer.notes().begin(), summary.trailer.notes().end());
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
