// What the probes need from an executable or shared library on disk: its
// USDT notes placed at their real addresses, its symbols, and the file
// offsets that uprobes are attached by.
#ifndef LOUPE_DAEMON_PROBES_ELF_FILE_H_
#define LOUPE_DAEMON_PROBES_ELF_FILE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/base/scoped_fd.h"
#include "daemon/probes/usdt_notes.h"

struct Elf;

namespace loupe::probes {

struct ElfSymbol {
  uint64_t address = 0;  // link-time
  uint64_t size = 0;
  bool global = false;
};

// A function found by an address in it.
struct ElfFunction {
  std::string name;  // empty: known only by its unwind information
  ElfSymbol symbol;
};

class ElfFile {
 public:
  static absl::StatusOr<std::unique_ptr<ElfFile>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // Notes with pc and semaphore moved by how far .stapsdt.base moved since
  // the notes were written (prelink), as consumers of the convention do.
  absl::StatusOr<std::vector<UsdtNote>> UsdtNotes() const;
  // A function or object by name, from .symtab, else .dynsym.
  std::optional<ElfSymbol> FindSymbol(const std::string& name) const;
  // Every one whose name `matches` (of both tables: a symbol may repeat).
  std::vector<ElfSymbol> SymbolsWhere(const std::function<bool(std::string_view)>& matches) const;
  bool HasSymbolTable() const;
  // Built by Go's toolchain: its runtime moves goroutine stacks and reads
  // their return addresses, so a return probe (which replaces one) kills it.
  bool IsGo() const;
  // Has code that exceptions (C++) or panics (Rust) unwind through: the
  // tables of its catches and cleanups.
  bool HasExceptionTables() const;
  // The file offset of a link-time address inside a loaded segment.
  absl::StatusOr<uint64_t> FileOffset(uint64_t address) const;
  // The function whose code holds a file offset: the function symbol
  // around it, else the range of the unwind information (.eh_frame FDE)
  // that covers it, which a stripped file keeps for its static functions.
  absl::StatusOr<ElfFunction> FunctionAt(uint64_t file_offset) const;
  // Up to `n` bytes of the file at a link-time address.
  std::vector<uint8_t> BytesAt(uint64_t address, size_t n) const;

 private:
  struct ElfEnd {
    void operator()(Elf* elf) const;
  };
  ElfFile(std::string path, ScopedFd fd, Elf* elf);
  std::string path_;
  ScopedFd fd_;  // the descriptor libelf reads through
  std::unique_ptr<Elf, ElfEnd> elf_;
};

}  // namespace loupe::probes

#endif  // LOUPE_DAEMON_PROBES_ELF_FILE_H_
