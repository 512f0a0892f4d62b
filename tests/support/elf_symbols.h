// Address ranges of functions in an ELF file's symbol table, to tell which
// function a raw stack frame of a (non-PIE) test program is in.
#ifndef LOUPE_TESTS_SUPPORT_ELF_SYMBOLS_H_
#define LOUPE_TESTS_SUPPORT_ELF_SYMBOLS_H_

#include <cstdint>
#include <map>
#include <string>

namespace loupe::testing {

struct AddressRange {
  uint64_t start = 0;
  uint64_t end = 0;
  bool Contains(uint64_t address) const { return address >= start && address < end; }
};

// Function name -> range, from .symtab. Empty if the file cannot be read.
std::map<std::string, AddressRange> FunctionRanges(const std::string& path);

}  // namespace loupe::testing

#endif  // LOUPE_TESTS_SUPPORT_ELF_SYMBOLS_H_
