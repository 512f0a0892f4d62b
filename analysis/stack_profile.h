// A trace's stacks, aggregated while it streams by: per distinct (process,
// user stack, kernel stack) the CPU samples that hit it and the off-CPU
// time spent in it; and the names for its frames, from the symbol tables of
// the segments (known once each is read). Memory grows with distinct stacks
// and addresses, not with the length of the trace.
#ifndef LOUPE_TOOLS_TRACECTL_STACK_PROFILE_H_
#define LOUPE_TOOLS_TRACECTL_STACK_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "daemon/format/record.h"
#include "loupe/v1/trace.pb.h"
#include "tools/tracectl/thread_directory.h"

namespace loupe::tracectl {

struct NamedFrame {
  std::string function;  // a fallback ("libc.so.6+0x1234", "0xffff…") when unknown
  std::string file;
  uint32_t line = 0;
  bool kernel = false;
};

struct StackTotals {
  uint64_t samples = 0;
  uint64_t off_cpu_ns = 0;
};

class StackProfile {
 public:
  using Key = std::tuple<uint32_t, std::vector<uint64_t>, std::vector<uint64_t>>;  // pid, user, kernel

  // Feed every record in time order.
  void Add(const format::Record& record);
  // Feed every segment's symbol table.
  void AddSymbols(const v1::SymbolTable& table);

  const std::map<Key, StackTotals>& stacks() const { return stacks_; }
  uint64_t samples() const { return samples_; }
  std::string ProcessName(uint32_t pid) const { return threads_.ProcessName(pid); }
  const ThreadDirectory& threads() const { return threads_; }
  // The frames of one address, innermost (inlined) first.
  std::vector<NamedFrame> Frames(uint32_t pid, uint64_t address, bool kernel) const;
  // Every frame of a stack, innermost first: kernel frames, then user frames.
  std::vector<NamedFrame> StackFrames(const Key& key) const;
  // The mapping of a user address, or nullptr.
  const v1::SymbolTable::Mapping* MappingOf(uint32_t pid, uint64_t address) const;

 private:
  struct Symbol {
    std::vector<NamedFrame> frames;
    int mapping = -1;  // into mappings_
  };
  std::map<Key, StackTotals> stacks_;
  uint64_t samples_ = 0;
  ThreadDirectory threads_;
  std::map<std::pair<uint32_t, uint64_t>, Symbol> symbols_;  // (pid, address); pid 0: kernel
  std::vector<v1::SymbolTable::Mapping> mappings_;
};

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_STACK_PROFILE_H_
