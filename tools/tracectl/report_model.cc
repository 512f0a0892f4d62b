#include "tools/tracectl/report_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace loupe::tracectl {
namespace {

constexpr uint64_t kOperationBit = 1ull << 63;
constexpr size_t kMaxOpenPerThread = 64;

}  // namespace

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
  if (filter_.pid && directory().PidOf(record.tid) != *filter_.pid) return false;
  const uint64_t at = record.time_ns - first_ns_;
  if (at < filter_.since_ns || at > filter_.until_ns) return false;
  return !filter_.operation || operation == *filter_.operation;
}

void ReportModel::Add(const format::Record& record) {
  using namespace format;
  if (first_ns_ == 0) first_ns_ = record.time_ns;
  last_ns_ = std::max(last_ns_, record.time_ns);
  if (std::holds_alternative<ThreadInfo>(record.payload) ||
      std::holds_alternative<ProcessInfo>(record.payload) ||
      std::holds_alternative<ProcessFork>(record.payload)) {
    stacks_.Add(record);  // its thread directory is the report's one
    return;
  }
  if (const auto* change = std::get_if<SchedSwitch>(&record.payload)) {
    last_off_cpu_[record.cpu] = record.tid;
    // On-CPU time of target threads (those the trace describes), from switch
    // in to switch out; not attributable to an operation, so not filtered by one.
    if (auto in = switched_in_.find(record.tid); in != switched_in_.end()) {
      if (!filter_.operation && Wanted(record, 0)) {
        threads_[record.tid].on_cpu_ns += record.time_ns - in->second;
      }
      switched_in_.erase(in);
    }
    if (directory().Known(change->next_tid)) switched_in_[change->next_tid] = record.time_ns;
  } else if (const auto* sample = std::get_if<CpuSample>(&record.payload)) {
    const uint32_t pid = directory().PidOf(record.tid);
    if (!sample->user_stack.empty()) last_leaf_[record.tid] = {pid, sample->user_stack[0]};
    if (!Wanted(record, sample->operation_id)) return;
    ++threads_[record.tid].samples;
    stacks_.Add(record);
    if (auto open = open_.find(record.tid); open != open_.end()) {
      for (auto& [id, span] : open->second) {
        ++(sample->kernel_stack.empty() ? span.user_samples : span.kernel_samples);
        if (!sample->user_stack.empty()) ++span.leaves[{pid, sample->user_stack[0]}];
      }
    }
  } else if (const auto* off = std::get_if<OffCpu>(&record.payload)) {
    if (!Wanted(record, off->operation_id)) return;
    ThreadTotals& thread = threads_[record.tid];
    thread.off_cpu_raw[{off->prev_state, {off->kernel_stack.begin(), off->kernel_stack.end()}}] +=
        off->duration_ns;
    thread.runq.Add(off->runq_ns);
    stacks_.Add(record);
    if (auto open = open_.find(record.tid); open != open_.end()) {
      const StackProfile::Key key{directory().PidOf(record.tid),
                                  {off->user_stack.begin(), off->user_stack.end()},
                                  {off->kernel_stack.begin(), off->kernel_stack.end()}};
      for (auto& [id, span] : open->second) {
        // Spans begin on CPU, so the interval lies inside; min() guards odd clocks.
        const uint64_t in_span = std::min(off->duration_ns, record.time_ns - span.begin_ns);
        auto& [state, ns] = span.blocked[key];
        state = off->prev_state;
        ns += in_span;
        if (off->waker_tid != 0) span.wakers[off->waker_tid] += in_span;
        const uint64_t runq = std::min(off->runq_ns, in_span);
        span.runq_ns += runq;
        if (runq != 0) {
          if (auto before = last_off_cpu_.find(record.cpu); before != last_off_cpu_.end()) {
            span.ran_instead[before->second] += runq;
          }
        }
      }
    }
  } else if (const auto* begin = std::get_if<SpanBegin>(&record.payload)) {
    if (Wanted(record, begin->operation_id)) {
      open_spans_[begin->span_id] = {std::string(begin->name), record.time_ns};
      Open(record.tid, begin->span_id, std::string(begin->name), begin->operation_id,
           record.time_ns);
    }
  } else if (const auto* end = std::get_if<SpanEnd>(&record.payload)) {
    if (auto open = open_spans_.find(end->span_id); open != open_spans_.end()) {
      spans_[open->second.first].Add(record.time_ns - open->second.second);
      open_spans_.erase(open);
      Close(record.tid, end->span_id, record.time_ns);
    }
  } else if (const auto* begin_op = std::get_if<OperationBegin>(&record.payload)) {
    if (Wanted(record, begin_op->operation_id)) {
      Open(record.tid, begin_op->operation_id | kOperationBit,
           "operation " + std::string(begin_op->name), begin_op->operation_id, record.time_ns);
    }
  } else if (const auto* end_op = std::get_if<OperationEnd>(&record.payload)) {
    Close(record.tid, end_op->operation_id | kOperationBit, record.time_ns);
  } else if (const auto* ret = std::get_if<UprobeReturn>(&record.payload)) {
    if (ret->duration_ns != 0 && Wanted(record, 0)) calls_[std::string(ret->probe)].Add(ret->duration_ns);
  } else if (const auto* usdt = std::get_if<UsdtEvent>(&record.payload)) {
    if (Wanted(record, 0)) ++usdt_[std::string(usdt->probe)];
  }
}

void ReportModel::Open(uint32_t tid, uint64_t id, std::string name, uint64_t operation,
                       uint64_t time) {
  auto& open = open_[tid];
  if (open.size() >= kMaxOpenPerThread) return;
  SlowSpan span;
  span.name = std::move(name);
  span.tid = tid;
  span.operation_id = operation;
  span.begin_ns = time;
  open.emplace_back(id, std::move(span));
}

// Keeps the kSlowest longest; what the rest accumulated is dropped.
void ReportModel::Close(uint32_t tid, uint64_t id, uint64_t time) {
  auto open = open_.find(tid);
  if (open == open_.end()) return;
  auto& spans = open->second;
  auto it = std::find_if(spans.rbegin(), spans.rend(), [id](const auto& s) { return s.first == id; });
  if (it == spans.rend()) return;
  SlowSpan span = std::move(it->second);
  spans.erase(std::next(it).base());
  if (spans.empty()) open_.erase(open);
  span.duration_ns = time - span.begin_ns;
  if (slowest_.size() == kSlowest && span.duration_ns <= slowest_.back().duration_ns) return;
  auto at = std::upper_bound(slowest_.begin(), slowest_.end(), span.duration_ns,
                             [](uint64_t d, const SlowSpan& s) { return d > s.duration_ns; });
  slowest_.insert(at, std::move(span));
  if (slowest_.size() > kSlowest) slowest_.pop_back();
}

std::string ReportModel::FunctionName(uint32_t pid, uint64_t address, bool kernel) const {
  std::vector<NamedFrame> frames = stacks_.Frames(pid, address, kernel);
  return frames.empty() ? "?" : frames.front().function;
}

std::string ReportModel::Doing(uint32_t tid) const {
  std::string name = directory().ThreadName(tid);
  std::string doing = fmt::format("tid {}{}", tid, name.empty() ? "" : " " + name);
  if (auto leaf = last_leaf_.find(tid); leaf != last_leaf_.end()) {
    doing += ", last seen in " + FunctionName(leaf->second.first, leaf->second.second, false);
  }
  return doing;
}

void ReportModel::Finish() {
  for (SlowSpan& span : slowest_) {
    for (const auto& [key, blocked] : span.blocked) {
      std::vector<NamedFrame> kernel;
      for (uint64_t address : std::get<2>(key)) {
        for (NamedFrame& frame : stacks_.Frames(0, address, true)) kernel.push_back(frame);
      }
      span.off_cpu_ns[ClassifyOffCpu(blocked.first, kernel)] += blocked.second;
    }
  }
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
