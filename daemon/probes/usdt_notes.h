// USDT probe descriptors in the SystemTap convention: the ".note.stapsdt"
// notes of an ELF file and their argument specs ("-4@-20(%rbp) 8@%rdi").
// Pure parsing of bytes and text, so both are fuzzed; elf_file.h finds the
// bytes. Errors name the note (by index) or the argument and what is wrong.
#ifndef LOUPE_DAEMON_PROBES_USDT_NOTES_H_
#define LOUPE_DAEMON_PROBES_USDT_NOTES_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loupe::probes {

struct UsdtNote {
  uint64_t pc = 0;         // link-time address of the probe site
  uint64_t base = 0;       // link-time address of _.stapsdt.base as the note saw it
  uint64_t semaphore = 0;  // link-time address, 0 = none
  std::string provider;
  std::string name;
  std::string args;
};

// Parses the contents of a ".note.stapsdt" section of a 64-bit ELF file.
absl::StatusOr<std::vector<UsdtNote>> ParseUsdtNotes(std::span<const uint8_t> section);

enum class UsdtArgKind { kConstant, kRegister, kMemory, kRipRelative };

struct UsdtArg {
  UsdtArgKind kind = UsdtArgKind::kConstant;
  uint8_t size = 8;  // bytes
  bool is_signed = false;
  int64_t value = 0;     // the constant, or the displacement of a memory operand
  std::string reg;       // without "%": "rdi", "r8d", "al"
  uint16_t reg_offset = 0;  // of the register's 64-bit home in struct pt_regs
  std::string symbol;    // of a RIP-relative operand, "" when it is a number
};

// Parses an x86-64 argument string, e.g. "8@%rdi -4@-20(%rbp) 4@$5 -4@counter(%rip)".
absl::StatusOr<std::vector<UsdtArg>> ParseUsdtArgs(std::string_view args);

}  // namespace loupe::probes

#endif  // LOUPE_DAEMON_PROBES_USDT_NOTES_H_
