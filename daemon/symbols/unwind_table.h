// An x86-64 ELF file's call frame information (DWARF CFI) compiled into a
// flat, sorted table of simple rules, so that a BPF program can walk the
// user stacks of code built without frame pointers (the approach of the
// OpenTelemetry eBPF profiler). Rules a BPF walker cannot follow become
// kUnsupported: the walk stops there rather than guessing.
#ifndef LOUPE_DAEMON_SYMBOLS_UNWIND_TABLE_H_
#define LOUPE_DAEMON_SYMBOLS_UNWIND_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace loupe::symbols {

// How to find the caller's registers at an address (x86-64). The return
// address is always at CFA - 8 on x86-64.
enum class UnwindKind : uint8_t {
  kNone = 0,       // no FDE covers the address (code without CFI, such as V8's builtins
                   // inside node's text): a walker may try frame pointers
  kCfaRsp = 1,     // CFA = rsp + cfa_offset
  kCfaRbp = 2,     // CFA = rbp + cfa_offset
  kOutermost = 3,  // the return address is undefined: the stack's bottom (_start, thread starts)
  kSignal = 4,     // the signal return trampoline (glibc __restore_rt): registers are in the
                   // ucontext at rsp
  kPlt = 5,        // a lazy PLT stub, whose CFA is an expression: CFA = rsp + cfa_offset (8),
                   // plus 8 where (address & 15) >= 11
  kCfaRegister = 6,  // CFA = cfa_register + cfa_offset, another register than rsp or rbp
                     // (ld.so's lazy binding trampoline, OpenSSL's assembly): known at the leaf
  kUnsupported = 7,  // rules a BPF walker cannot follow: a walk must stop here
  kCfaDerefRbp = 8,  // CFA = *(rbp + cfa_offset): a frame realigned through a saved pointer
                     // (gcc's DRAP, for over-aligned locals)
};

struct UnwindRow {
  uint64_t address = 0;  // ELF virtual address where this rule starts; it holds until the next row
  UnwindKind kind = UnwindKind::kNone;
  int32_t cfa_offset = 0;
  int32_t rbp_offset = 0;  // rbp was saved at CFA + rbp_offset; 0: rbp keeps the caller's value
  uint8_t cfa_register = 0;  // DWARF register number, for kCfaRegister
  bool rbp_from_rbp = false;  // rbp was saved at rbp + rbp_offset instead (DRAP frames)
  friend bool operator==(const UnwindRow&, const UnwindRow&) = default;
};

struct UnwindTable {
  std::vector<UnwindRow> rows;  // sorted by address; no two adjacent rows with the same rule
  size_t functions = 0;         // FDEs read
  size_t unsupported = 0;       // CFI rows whose rules cannot be expressed (kUnsupported)
};

// At most this many rows come from one file, counted before merging: one per
// CFI row, and one kNone per gap between FDEs.
inline constexpr size_t kMaxUnwindRows = size_t{8} << 20;

// From .eh_frame (its FDEs listed by .eh_frame_hdr's sorted table when it has
// one), else from .debug_frame in the same file; in a Go program, the
// runtime's functions where its stacks begin and switch are kOutermost
// (go_stack_ends.h). Errors name the section and what was wrong; the caller
// adds the file's name.
absl::StatusOr<UnwindTable> CompileUnwindTable(int fd);

// The code range [start, end) of the FDE that covers `address` (link-time)
// in .eh_frame, else .debug_frame: one function's code, or its .cold
// part's. What a stripped file keeps of a static function's extent.
struct CodeExtent {
  uint64_t start = 0, end = 0;
  // Its start is a function's entry: the frame there is a fresh call's
  // (CFA = rsp + 8). A part split off a function (.cold) starts inside
  // its parent's frame.
  bool entry = false;
};
absl::StatusOr<CodeExtent> FdeExtentAt(int fd, uint64_t address);

// `primary`'s rules, and `secondary`'s where `primary` has none (kNone, or
// before its first row): both sorted, the result too, adjacent rules merged.
std::vector<UnwindRow> Overlay(const std::vector<UnwindRow>& primary,
                               const std::vector<UnwindRow>& secondary);

// The row that applies at `address`, or nullptr (before the first row).
const UnwindRow* FindUnwindRow(const std::vector<UnwindRow>& rows, uint64_t address);

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_UNWIND_TABLE_H_
