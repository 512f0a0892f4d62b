// Source-level names for addresses in one ELF file, with elfutils' libdw:
// function (demangled), each inlined level as its own frame, file and line,
// from the file's DWARF or its separate debug file (.gnu_debuglink, or
// /usr/lib/debug/.build-id/), else from its symbol table.
#ifndef LOUPE_DAEMON_SYMBOLS_ELF_SYMBOLIZER_H_
#define LOUPE_DAEMON_SYMBOLS_ELF_SYMBOLIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/symbols/object_file.h"

struct Dwfl;
struct Dwfl_Module;

namespace loupe::symbols {

struct SourceFrame {
  std::string function;  // "" when unknown
  std::string file;
  uint32_t line = 0;
  bool inlined = false;  // inlined into the next frame
  bool operator==(const SourceFrame&) const = default;
};

class ElfSymbolizer {
 public:
  // Never fails: a file libdw cannot read yields no frames and says why in note().
  explicit ElfSymbolizer(const ObjectFile& object);
  ~ElfSymbolizer();
  ElfSymbolizer(const ElfSymbolizer&) = delete;
  ElfSymbolizer& operator=(const ElfSymbolizer&) = delete;

  // Innermost first; empty when nothing is known about the address.
  std::vector<SourceFrame> Symbolize(uint64_t file_offset);
  // What limits the answers ("no debug information: symbol table only"), or "".
  const std::string& note() const { return note_; }

 private:
  struct Load {
    uint64_t offset, vaddr, size;
  };
  bool ToAddress(uint64_t file_offset, uint64_t* address) const;

  Dwfl* dwfl_ = nullptr;
  Dwfl_Module* module_ = nullptr;
  std::vector<Load> loads_;
  bool has_dwarf_ = false;
  std::string note_;
};

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_ELF_SYMBOLIZER_H_
