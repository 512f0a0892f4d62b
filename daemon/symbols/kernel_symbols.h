// Kernel function names for kernel stack frames, from /proc/kallsyms
// (modules included). When kptr_restrict hides the addresses (all read as
// 0), nothing can be named and note() says so.
#ifndef LOUPE_DAEMON_SYMBOLS_KERNEL_SYMBOLS_H_
#define LOUPE_DAEMON_SYMBOLS_KERNEL_SYMBOLS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loupe::symbols {

class KernelSymbols {
 public:
  // Parses kallsyms text (the file's format: "ADDRESS TYPE NAME [MODULE]").
  explicit KernelSymbols(std::string_view kallsyms);
  static KernelSymbols Load();  // from /proc/kallsyms

  // "function" or "function [module]"; "" when unknown.
  std::string Name(uint64_t address) const;
  const std::string& note() const { return note_; }

 private:
  struct Symbol {
    uint64_t address;
    std::string name;
  };
  std::vector<Symbol> symbols_;  // sorted by address
  std::string note_;
};

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_KERNEL_SYMBOLS_H_
