#include "daemon/symbols/kernel_symbols.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <limits>
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

std::optional<std::pair<uint64_t, uint64_t>> KernelSymbols::FunctionRange(std::string_view name) {
  // Addresses only, read as a stream: the whole table with its names would
  // be tens of MB at the peak of a session's start.
  std::ifstream in("/proc/kallsyms");
  std::vector<uint64_t> text;
  uint64_t start = 0;
  std::string address, type, symbol;
  while (in >> address >> type >> symbol) {
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    if (type != "t" && type != "T") continue;
    uint64_t value = 0;
    auto [end, error] = std::from_chars(address.data(), address.data() + address.size(), value, 16);
    if (error != std::errc() || value == 0) continue;
    text.push_back(value);
    if (symbol == name && start == 0) start = value;
  }
  if (start == 0) return std::nullopt;
  uint64_t next = UINT64_MAX;
  for (uint64_t value : text) {
    if (value > start && value < next) next = value;
  }
  if (next == UINT64_MAX) return std::nullopt;
  return std::pair{start, next};
}

}  // namespace loupe::symbols
