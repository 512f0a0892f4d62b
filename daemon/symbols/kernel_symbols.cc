#include "daemon/symbols/kernel_symbols.h"

#include <fcntl.h>

#include <algorithm>

#include "daemon/base/scoped_fd.h"

namespace loupe::symbols {

KernelSymbols::KernelSymbols(std::string_view kallsyms) {
  while (!kallsyms.empty()) {
    const size_t newline = std::min(kallsyms.find('\n'), kallsyms.size());
    if (std::optional<KallsymsLine> line = ParseKallsymsLine(kallsyms.substr(0, newline))) {
      Add(*line);
    }
    kallsyms.remove_prefix(std::min(newline + 1, kallsyms.size()));
  }
  Finish();
}

KernelSymbols KernelSymbols::Load() {
  KernelSymbols kernel;
  ScopedFd fd(::open("/proc/kallsyms", O_RDONLY | O_CLOEXEC));
  if (fd.valid()) ForEachKallsymsLine(fd.get(), [&](const KallsymsLine& line) { kernel.Add(line); });
  kernel.Finish();
  return kernel;
}

void KernelSymbols::Add(const KallsymsLine& line) {
  if (line.address == 0) {
    hidden_ = true;
    return;
  }
  // Text symbols only: data symbols would name addresses inside functions.
  if (!line.IsText()) return;
  const size_t offset = names_.size();
  names_ += line.name;
  if (!line.module.empty()) names_.append(" [").append(line.module).append("]");
  symbols_.push_back({line.address, static_cast<uint32_t>(offset),
                      static_cast<uint32_t>(names_.size() - offset)});
}

void KernelSymbols::Finish() {
  std::sort(symbols_.begin(), symbols_.end(),
            [](const Symbol& a, const Symbol& b) { return a.address < b.address; });
  symbols_.shrink_to_fit();
  names_.shrink_to_fit();
  if (symbols_.empty()) {
    note_ = hidden_ ? "kernel addresses hidden by kptr_restrict: kernel frames are not named"
                    : "no kernel symbols: kernel frames are not named";
  }
}

std::string KernelSymbols::Name(uint64_t address) const {
  auto after = std::upper_bound(symbols_.begin(), symbols_.end(), address,
                                [](uint64_t a, const Symbol& s) { return a < s.address; });
  if (after == symbols_.begin()) return "";
  const Symbol& symbol = *std::prev(after);
  return names_.substr(symbol.name_offset, symbol.name_length);
}

}  // namespace loupe::symbols
