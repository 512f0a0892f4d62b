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

#include "daemon/symbols/kallsyms_scan.h"

namespace loupe::symbols {

class KernelSymbols {
 public:
  // Parses kallsyms text (the file's format: "ADDRESS TYPE NAME[\t[MODULE]]").
  explicit KernelSymbols(std::string_view kallsyms);
  static KernelSymbols Load();  // from /proc/kallsyms, streamed

  // "function" or "function [module]"; "" when unknown.
  std::string Name(uint64_t address) const;
  const std::string& note() const { return note_; }

 private:
  KernelSymbols() = default;
  void Add(const KallsymsLine& line);
  void Finish();

  // 16 bytes a symbol and one arena of names ("name" or "name [module]"):
  // a string per symbol cost twice as much for the kernel's 120 k functions.
  struct Symbol {
    uint64_t address;
    uint32_t name_offset;
    uint32_t name_length;
  };
  std::vector<Symbol> symbols_;  // sorted by address
  std::string names_;
  bool hidden_ = false;
  std::string note_;
};

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_KERNEL_SYMBOLS_H_
