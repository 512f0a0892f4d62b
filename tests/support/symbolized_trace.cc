#include "tests/support/symbolized_trace.h"

#include <map>
#include <optional>
#include <utility>

#include "daemon/format/segment_reader.h"
#include "daemon/format/trace_reader.h"

namespace loupe::testing {
namespace {

struct Names {
  std::map<std::pair<uint32_t, uint64_t>, std::vector<NamedFrame>> by_pid;  // (pid, address)
  std::map<uint64_t, const std::vector<NamedFrame>*> user;                  // of any process
};

// `pid` 0: kernel addresses; nullopt: a thread whose process the segment
// never said, whose addresses are looked up in any process.
std::vector<NamedFrame> Name(const Names& names, std::optional<uint32_t> pid,
                             const std::vector<uint64_t>& stack) {
  std::vector<NamedFrame> named;
  for (uint64_t address : stack) {
    const std::vector<NamedFrame>* frames = nullptr;
    if (pid) {
      auto it = names.by_pid.find({*pid, address});
      if (it != names.by_pid.end()) frames = &it->second;
    } else if (auto it = names.user.find(address); it != names.user.end()) {
      frames = it->second;
    }
    if (!frames) {
      named.push_back({.function = "<missing from the table>", .address = address});
      continue;
    }
    if (frames->empty()) named.push_back({.function = "?", .address = address});
    for (NamedFrame frame : *frames) {
      frame.address = address;
      named.push_back(std::move(frame));
    }
  }
  return named;
}

}  // namespace

SymbolizedTrace Symbolize(const std::string& dir) {
  SymbolizedTrace trace;
  auto paths = format::ListSegments(dir);
  if (!paths.ok()) return trace;
  trace.readable = !paths->empty();
  std::map<uint32_t, uint32_t> pid_of;  // tid -> pid; a thread's records may precede its info
  for (const std::string& path : *paths) {
    auto reader = format::SegmentReader::Open(path);
    if (!reader.ok()) return {};
    // The table comes at the segment's end: its stacks wait for it.
    std::vector<SymbolizedStack> samples, off_cpu;
    format::Record record;
    while ((*reader)->Next(&record)) {
      if (const auto* sample = std::get_if<format::CpuSample>(&record.payload)) {
        samples.push_back({record.tid,
                           {sample->user_stack.begin(), sample->user_stack.end()},
                           {sample->kernel_stack.begin(), sample->kernel_stack.end()}});
      } else if (const auto* off = std::get_if<format::OffCpu>(&record.payload)) {
        off_cpu.push_back({record.tid,
                           {off->user_stack.begin(), off->user_stack.end()},
                           {off->kernel_stack.begin(), off->kernel_stack.end()}});
        off_cpu.back().time_ns = record.time_ns;
        off_cpu.back().duration_ns = off->duration_ns;
      } else if (const auto* thread = std::get_if<format::ThreadInfo>(&record.payload)) {
        pid_of[record.tid] = thread->pid;
      } else if (std::holds_alternative<format::ProcessInfo>(record.payload)) {
        pid_of[record.tid] = record.tid;
      }
    }
    const v1::SymbolTable& table = (*reader)->symbols();
    Names names;
    for (const auto& address : table.addresses()) {
      std::vector<NamedFrame> frames;
      for (const auto& frame : address.frames()) {
        frames.push_back({frame.function(), frame.file(), frame.line(), frame.inlined()});
      }
      if (address.pid() == 0 && !frames.empty()) {
        trace.kernel_names.push_back(frames.front().function);
      }
      auto [it, added] =
          names.by_pid.emplace(std::pair{address.pid(), address.address()}, std::move(frames));
      if (added && address.pid() != 0) names.user.emplace(address.address(), &it->second);
    }
    trace.notes.insert(trace.notes.end(), table.notes().begin(), table.notes().end());
    for (auto [from, to] :
         {std::pair{&samples, &trace.samples}, std::pair{&off_cpu, &trace.off_cpu}}) {
      for (SymbolizedStack& stack : *from) {
        auto pid = pid_of.find(stack.tid);
        stack.user_frames = Name(
            names, pid == pid_of.end() ? std::nullopt : std::optional(pid->second), stack.user);
        stack.kernel_frames = Name(names, 0, stack.kernel);
        to->push_back(std::move(stack));
      }
    }
  }
  return trace;
}

}  // namespace loupe::testing
