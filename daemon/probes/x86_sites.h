// Sites in a function's x86-64 code, decoded with Capstone: where it
// returns, whether its first instruction can carry a uprobe, and where a Go
// function's stack check ends.
//
// Returns, for return probes that leave the stack alone. The kernel's return probe swaps the return address on the stack for its
// trampoline. An unwinder that then walks the stack (a C++ exception or a
// Rust panic passing through the call) finds no frame info for that address
// and gives up: std::terminate, the program dies. A uprobe on each of the
// function's return instructions sees the same returns, with the same
// registers, and touches nothing; a call left by unwinding simply has no
// return. Nor has one that leaves by a tail call (a jump to another
// function, whose return is the real one): timed to the jump it would read
// shorter than it was, so it is counted and said instead.
#ifndef LOUPE_DAEMON_PROBES_X86_SITES_H_
#define LOUPE_DAEMON_PROBES_X86_SITES_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace loupe::probes {

// A function's code: its bytes and the link-time address of the first.
struct CodeRange {
  uint64_t address = 0;
  std::span<const uint8_t> bytes;
};

struct ReturnSites {
  std::vector<uint64_t> addresses;  // link-time, of each return instruction
  // Direct jumps out of the function, conditional or not: tail calls.
  size_t tail_calls = 0;
};

// Decodes x86-64 `function` and, if the compiler split it, its `.cold`
// part (a jump into either is not a way out). An instruction that cannot be
// decoded, or a branch that lands inside a decoded instruction (data in the
// code, overlapping instructions), is an error: a site placed inside an
// instruction corrupts it.
absl::StatusOr<ReturnSites> FindReturnSites(const CodeRange& function, const CodeRange& cold);

// Whether the kernel will place a uprobe on the instruction `at` begins
// with: x86's uprobes refuse a lock-prefixed one (ENOTSUPP at attach).
absl::Status CanCarryUprobe(const CodeRange& at);

// A Go function (Go 1.17+ on amd64, g in r14) begins by comparing the stack
// pointer with its goroutine's stack guard and branching to grow the stack,
// after which the runtime restarts it at its first instruction: a probe
// there fires twice for one call. The address right after that branch, or
// nullopt when the function has no such check (a leaf that never grows).
std::optional<uint64_t> GoStackCheckEnd(const CodeRange& function);

}  // namespace loupe::probes

#endif  // LOUPE_DAEMON_PROBES_X86_SITES_H_
