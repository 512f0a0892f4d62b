// A trace's stacks, interned as they stream by: each distinct (process, user
// stack, kernel stack) gets a dense id, with the CPU samples that hit it and
// the off-CPU time spent in it; and the names of frames, from the symbol
// tables of the segments (known once each is read). Memory grows with
// distinct stacks and addresses, not with the length of the trace.
#ifndef LOUPE_ANALYSIS_STACK_PROFILE_H_
#define LOUPE_ANALYSIS_STACK_PROFILE_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/thread_directory.h"
#include "daemon/format/record.h"
#include "loupe/v1/trace.pb.h"

namespace loupe::analysis {

struct NamedFrame {
  std::string function;  // a fallback ("libc.so.6+0x1234", "0xffff…") when unknown
  std::string file;
  uint32_t line = 0;
  bool kernel = false;
  // From a system library (/lib, /usr/lib) or code the kernel maps in (the
  // vDSO, uprobes' trampolines): not the application's code.
  bool system = false;
};

struct StackTotals {
  uint64_t samples = 0;
  uint64_t off_cpu_ns = 0;
};

struct StackKey {
  uint32_t pid = 0;
  std::vector<uint64_t> user;    // innermost first
  std::vector<uint64_t> kernel;  // innermost first
};

class StackProfile {
 public:
  static constexpr uint32_t kNoStack = 0;

  // Feed every record in time order. Returns the stack id of a CPU sample or
  // an off-CPU interval (kNoStack for other records and empty stacks).
  uint32_t Add(const format::Record& record);
  // Feed every segment's symbol table.
  void AddSymbols(const v1::SymbolTable& table);
  // The id of a stack, interning it if new.
  uint32_t Intern(uint32_t pid, format::Stack user, format::Stack kernel);

  // Ids run from 1 to stack_count().
  size_t stack_count() const { return keys_.size() - 1; }
  const StackKey& key(uint32_t id) const { return keys_[id]; }
  const StackTotals& totals(uint32_t id) const { return totals_[id]; }
  uint64_t samples() const { return samples_; }
  std::string ProcessName(uint32_t pid) const { return threads_.ProcessName(pid); }
  const ThreadDirectory& threads() const { return threads_; }
  // The frames of one address, innermost (inlined) first.
  std::vector<NamedFrame> Frames(uint32_t pid, uint64_t address, bool kernel) const;
  // Every frame of a stack, innermost first: kernel frames, then user
  // frames; the tracer's own frames left out.
  std::vector<NamedFrame> StackFrames(uint32_t id) const;
  // Where the application itself was in a stack: its innermost frame that
  // is not a system library's, else the innermost user frame, else the
  // innermost frame ("" for none).
  std::string InnermostApplicationFunction(uint32_t id) const;
  // The mapping of a user address, or nullptr.
  const v1::SymbolTable::Mapping* MappingOf(uint32_t pid, uint64_t address) const;

 private:
  struct Symbol {
    std::vector<NamedFrame> frames;
    int mapping = -1;  // into mappings_
  };
  std::vector<StackKey> keys_ = std::vector<StackKey>(1);  // id 0: none
  std::vector<StackTotals> totals_ = std::vector<StackTotals>(1);
  absl::flat_hash_map<uint64_t, uint32_t> ids_by_hash_;  // first id with that hash
  std::vector<uint32_t> next_with_hash_ = std::vector<uint32_t>(1);
  uint64_t samples_ = 0;
  ThreadDirectory threads_;
  std::map<std::pair<uint32_t, uint64_t>, Symbol> symbols_;  // (pid, address); pid 0: kernel
  std::vector<v1::SymbolTable::Mapping> mappings_;
};

// A system library's or the kernel's code mapped into every process (libc,
// the loader, the vDSO), not the application's own.
bool IsSystemPath(std::string_view path);

// Whether a stack (StackFrames) was taken inside the kernel's handling of a
// uprobe: a sample there is the tracer's cost, whatever function it interrupted.
bool InUprobeHandling(std::span<const NamedFrame> frames);
// The frame that ends a user stack cut short (format::kUnwindStoppedFrame).
inline constexpr std::string_view kUnwindStoppedName = "[unwinding stopped: callers unknown]";
// How such samples are named where functions are counted.
inline constexpr std::string_view kUprobeHandling = "[uprobe handling: Loupe's own cost]";

// Frames of the tracer itself (the BPF program taking the stack, the
// tracepoint that called it): they say nothing about the traced thread.
// louped leaves them out at capture (bpf/include/unwind.bpf.h); traces
// written before that, or where kallsyms hid __schedule, still have them.
bool IsTracerFrame(const NamedFrame& frame);

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_STACK_PROFILE_H_
