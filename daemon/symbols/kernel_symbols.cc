#include "daemon/symbols/kernel_symbols.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <vector>
#include <sstream>

namespace loupe::symbols {

KernelSymbols::KernelSymbols(std::string_view kallsyms) {
  bool hidden = false;
  while (!kallsyms.empty()) {
    const size_t newline = std::min(kallsyms.find('\n'), kallsyms.size());
    std::istringstream line{std::string(kallsyms.substr(0, newline))};
    kallsyms.remove_prefix(std::min(newline + 1, kallsyms.size()));
    std::string address, type, name, module;
    if (!(line >> address >> type >> name)) continue;
    line >> module;
    uint64_t value = 0;
    auto [end, error] = std::from_chars(address.data(), address.data() + address.size(), value, 16);
    if (error != std::errc() || end != address.data() + address.size()) continue;
    if (value == 0) {
      hidden = true;
      continue;
    }
    // Text symbols only: data symbols would name addresses inside functions.
    if (type != "t" && type != "T" && type != "w" && type != "W") continue;
    symbols_.push_back({value, module.empty() ? name : name + " " + module});
  }
  std::sort(symbols_.begin(), symbols_.end(),
            [](const Symbol& a, const Symbol& b) { return a.address < b.address; });
  if (symbols_.empty()) {
    note_ = hidden ? "kernel addresses hidden by kptr_restrict: kernel frames are not named"
                   : "no kernel symbols: kernel frames are not named";
  }
}

KernelSymbols KernelSymbols::Load() {
  std::ifstream in("/proc/kallsyms");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  return KernelSymbols(text);
}

std::string KernelSymbols::Name(uint64_t address) const {
  auto after = std::upper_bound(symbols_.begin(), symbols_.end(), address,
                                [](uint64_t a, const Symbol& s) { return a < s.address; });
  if (after == symbols_.begin()) return "";
  return std::prev(after)->name;
}

}  // namespace loupe::symbols
