// A trace's stacks as Perfetto's interned profiling messages, as its own
// profilers write them: a callstack is a list of frames (outermost first),
// a frame a function name in a mapping at an offset (rel_pc), a mapping a
// file (or the kernel). Each is defined once, in the packet that first uses
// it, and named by id afterwards.
#ifndef LOUPE_ANALYSIS_PERFETTO_CALLSTACKS_H_
#define LOUPE_ANALYSIS_PERFETTO_CALLSTACKS_H_

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/perfetto_sequence.h"
#include "analysis/stack_profile.h"

namespace loupe::analysis {

class PerfettoCallstacks {
 public:
  // `stacks` has every symbol table, and interns the stacks asked for.
  PerfettoCallstacks(PerfettoSequence& sequence, const StackProfile& stacks)
      : sequence_(sequence), stacks_(stacks) {}

  // The callstack iid of a StackProfile stack id (not kNoStack).
  uint64_t Of(uint32_t stack);

 private:
  // Appends the frames of one address, innermost first.
  void AddFrames(uint32_t pid, uint64_t address, bool kernel, std::vector<uint64_t>* frames);
  uint64_t Frame(uint64_t mapping, uint64_t rel_pc, const std::string& function, bool kernel);
  uint64_t UserMapping(uint32_t pid, const v1::SymbolTable::Mapping& mapping);
  uint64_t KernelMapping();

  PerfettoSequence& sequence_;
  const StackProfile& stacks_;
  std::vector<uint64_t> callstacks_;  // by stack id; 0: not interned yet
  uint64_t callstack_count_ = 0, mapping_count_ = 0;
  uint64_t kernel_mapping_ = 0;
  // (pid, start, path) -> mapping iid
  absl::flat_hash_map<std::tuple<uint32_t, uint64_t, std::string>, uint64_t> mappings_;
  // (mapping, rel_pc, function) -> frame iid
  absl::flat_hash_map<std::tuple<uint64_t, uint64_t, std::string>, uint64_t> frames_;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_CALLSTACKS_H_
