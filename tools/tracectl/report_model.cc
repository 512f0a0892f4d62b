#include "tools/tracectl/report_model.h"

#include <algorithm>
#include <set>

namespace loupe::tracectl {

std::string ClassifyOffCpu(uint32_t prev_state, const std::vector<NamedFrame>& kernel_frames) {
  if (prev_state == 0) return "preempted";
  for (const NamedFrame& frame : kernel_frames) {
    const std::string& f = frame.function;
    if (f.find("futex") != std::string::npos) return "lock wait (futex)";
    if (f.find("nanosleep") != std::string::npos || f.find("hrtimer") != std::string::npos) {
      return "sleep";
    }
    if (f.find("pipe_read") != std::string::npos || f.find("pipe_write") != std::string::npos ||
        f.find("poll") != std::string::npos || f.find("select") != std::string::npos ||
        f.find("tcp_") != std::string::npos || f.find("unix_stream") != std::string::npos ||
        f.find("io_schedule") != std::string::npos || f.find("wait_on_page") != std::string::npos ||
        f.find("n_tty_read") != std::string::npos) {
      return "I/O or pipe wait";
    }
    if (f.find("handle_mm_fault") != std::string::npos || f.find("do_page_fault") != std::string::npos ||
        f.find("exc_page_fault") != std::string::npos) {
      return "page fault";
    }
  }
  if (prev_state & 0x2) return "blocked (uninterruptible)";
  return "sleeping";
}

bool ReportModel::Wanted(const format::Record& record, uint64_t operation) const {
  if (filter_.pid && directory_.PidOf(record.tid) != *filter_.pid) return false;
  const uint64_t at = record.time_ns - first_ns_;
  if (at < filter_.since_ns || at > filter_.until_ns) return false;
  return !filter_.operation || operation == *filter_.operation;
}

void ReportModel::Add(const format::Record& record) {
  using namespace format;
  if (first_ns_ == 0) first_ns_ = record.time_ns;
  last_ns_ = std::max(last_ns_, record.time_ns);
  directory_.Observe(record);
  if (const auto* change = std::get_if<SchedSwitch>(&record.payload)) {
    // On-CPU time of target threads (those the trace describes), from switch
    // in to switch out; not attributable to an operation, so not filtered by one.
    if (auto in = switched_in_.find(record.tid); in != switched_in_.end()) {
      if (!filter_.operation && Wanted(record, 0)) {
        threads_[record.tid].on_cpu_ns += record.time_ns - in->second;
      }
      switched_in_.erase(in);
    }
    if (directory_.Known(change->next_tid)) switched_in_[change->next_tid] = record.time_ns;
  } else if (const auto* sample = std::get_if<CpuSample>(&record.payload)) {
    if (!Wanted(record, sample->operation_id)) return;
    ++threads_[record.tid].samples;
    stacks_.Add(record);
  } else if (const auto* off = std::get_if<OffCpu>(&record.payload)) {
    if (!Wanted(record, off->operation_id)) return;
    ThreadTotals& thread = threads_[record.tid];
    thread.off_cpu_raw[{off->prev_state, {off->kernel_stack.begin(), off->kernel_stack.end()}}] +=
        off->duration_ns;
    thread.runq.Add(off->runq_ns);
    stacks_.Add(record);
  } else if (const auto* begin = std::get_if<SpanBegin>(&record.payload)) {
    if (Wanted(record, begin->operation_id)) {
      open_spans_[begin->span_id] = {std::string(begin->name), record.time_ns};
    }
  } else if (const auto* end = std::get_if<SpanEnd>(&record.payload)) {
    if (auto open = open_spans_.find(end->span_id); open != open_spans_.end()) {
      spans_[open->second.first].Add(record.time_ns - open->second.second);
      open_spans_.erase(open);
    }
  } else if (const auto* ret = std::get_if<UprobeReturn>(&record.payload)) {
    if (ret->duration_ns != 0 && Wanted(record, 0)) calls_[std::string(ret->probe)].Add(ret->duration_ns);
  } else if (const auto* usdt = std::get_if<UsdtEvent>(&record.payload)) {
    if (Wanted(record, 0)) ++usdt_[std::string(usdt->probe)];
  }
}

void ReportModel::Finish() {
  for (auto& [tid, thread] : threads_) {
    for (const auto& [key, ns] : thread.off_cpu_raw) {
      std::vector<NamedFrame> kernel;
      for (uint64_t address : key.second) {
        for (NamedFrame& frame : stacks_.Frames(0, address, true)) kernel.push_back(frame);
      }
      thread.off_cpu_ns[ClassifyOffCpu(key.first, kernel)] += ns;
    }
    thread.off_cpu_raw.clear();
  }
}

// Self: the leaf frame of each sample; total: every function in its stack, once.
std::vector<FunctionCost> ReportModel::TopFunctions(size_t n) const {
  std::map<std::string, FunctionCost> costs;
  for (const auto& [key, totals] : stacks_.stacks()) {
    if (totals.samples == 0) continue;
    const std::vector<NamedFrame> frames = stacks_.StackFrames(key);
    if (frames.empty()) continue;
    costs[frames.front().function].self += totals.samples;
    std::set<std::string> seen;
    for (const NamedFrame& frame : frames) {
      if (seen.insert(frame.function).second) costs[frame.function].total += totals.samples;
    }
  }
  std::vector<FunctionCost> top;
  for (auto& [name, cost] : costs) {
    cost.name = name;
    top.push_back(cost);
  }
  std::sort(top.begin(), top.end(), [](const FunctionCost& a, const FunctionCost& b) {
    return a.self != b.self ? a.self > b.self : a.total > b.total;
  });
  if (top.size() > n) top.resize(n);
  return top;
}

std::vector<BlockingStack> ReportModel::TopBlockingStacks(size_t n) const {
  std::vector<BlockingStack> top;
  for (const auto& [key, totals] : stacks_.stacks()) {
    if (totals.off_cpu_ns != 0) top.push_back({stacks_.StackFrames(key), totals.off_cpu_ns});
  }
  std::sort(top.begin(), top.end(), [](const BlockingStack& a, const BlockingStack& b) {
    return a.off_cpu_ns > b.off_cpu_ns;
  });
  if (top.size() > n) top.resize(n);
  return top;
}

}  // namespace loupe::tracectl
