#include "tools/tracectl/stack_profile.h"

#include <fmt/format.h>

namespace loupe::tracectl {

void StackProfile::Add(const format::Record& record) {
  using namespace format;
  threads_.Observe(record);
  if (const auto* sample = std::get_if<CpuSample>(&record.payload)) {
    ++samples_;
    Key key{threads_.PidOf(record.tid),
            {sample->user_stack.begin(), sample->user_stack.end()},
            {sample->kernel_stack.begin(), sample->kernel_stack.end()}};
    ++stacks_[std::move(key)].samples;
  } else if (const auto* off = std::get_if<OffCpu>(&record.payload)) {
    Key key{threads_.PidOf(record.tid),
            {off->user_stack.begin(), off->user_stack.end()},
            {off->kernel_stack.begin(), off->kernel_stack.end()}};
    stacks_[std::move(key)].off_cpu_ns += off->duration_ns;
  }
}

void StackProfile::AddSymbols(const v1::SymbolTable& table) {
  const int base = static_cast<int>(mappings_.size());
  mappings_.insert(mappings_.end(), table.mappings().begin(), table.mappings().end());
  for (const auto& address : table.addresses()) {
    Symbol symbol;
    if (address.mapping() != 0) symbol.mapping = base + static_cast<int>(address.mapping()) - 1;
    for (const auto& frame : address.frames()) {
      symbol.frames.push_back({frame.function(), frame.file(), frame.line(), address.pid() == 0});
    }
    symbols_[{address.pid(), address.address()}] = std::move(symbol);
  }
}

const v1::SymbolTable::Mapping* StackProfile::MappingOf(uint32_t pid, uint64_t address) const {
  auto it = symbols_.find({pid, address});
  if (it == symbols_.end() || it->second.mapping < 0 ||
      it->second.mapping >= static_cast<int>(mappings_.size())) {
    return nullptr;
  }
  return &mappings_[it->second.mapping];
}

std::vector<NamedFrame> StackProfile::Frames(uint32_t pid, uint64_t address, bool kernel) const {
  auto it = symbols_.find({kernel ? 0 : pid, address});
  if (it != symbols_.end()) {
    std::vector<NamedFrame> frames;
    for (const NamedFrame& frame : it->second.frames) {
      if (!frame.function.empty()) frames.push_back(frame);
    }
    if (!frames.empty()) return frames;
  }
  if (const v1::SymbolTable::Mapping* mapping = kernel ? nullptr : MappingOf(pid, address)) {
    const std::string& path = mapping->path();
    return {{fmt::format("{}+{:#x}", path.substr(path.rfind('/') + 1),
                         address - mapping->start() + mapping->file_offset())}};
  }
  return {{fmt::format("{:#x}", address), "", 0, kernel}};
}

std::vector<NamedFrame> StackProfile::StackFrames(const Key& key) const {
  const auto& [pid, user, kernel] = key;
  std::vector<NamedFrame> frames;
  for (uint64_t address : kernel) {
    for (NamedFrame& frame : Frames(pid, address, true)) {
      // The tracer's own frames (the BPF program taking the stack) say
      // nothing about the traced thread.
      const bool tracer = frame.function.starts_with("bpf_prog_") ||
                          frame.function.starts_with("bpf_trace_run");
      if (tracer && frames.empty()) continue;
      frame.kernel = true;
      frames.push_back(std::move(frame));
    }
  }
  for (uint64_t address : user) {
    for (NamedFrame& frame : Frames(pid, address, false)) frames.push_back(std::move(frame));
  }
  return frames;
}

}  // namespace loupe::tracectl
