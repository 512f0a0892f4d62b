#include "analysis/perfetto_callstacks.h"

#include <algorithm>

namespace loupe::analysis {
namespace {

using Strings = PerfettoSequence::Strings;

// Callstack, Frame and Mapping (protos/perfetto/trace/profiling/profile_common.proto).
constexpr uint32_t kIid = 1;
constexpr uint32_t kFrameIds = 2;
constexpr uint32_t kFunctionName = 2, kMapping = 3, kRelPc = 4, kKind = 7;
constexpr uint64_t kNative = 1, kKernel = 2;  // Frame.Kind
constexpr uint32_t kBuildId = 2, kStartOffset = 3, kStart = 4, kEnd = 5, kPath = 7,
                   kExactOffset = 8;

}  // namespace

uint64_t PerfettoCallstacks::Of(uint32_t stack) {
  if (stack >= callstacks_.size()) callstacks_.resize(stack + 1, 0);
  if (callstacks_[stack] != 0) return callstacks_[stack];
  const StackKey& key = stacks_.key(stack);
  std::vector<uint64_t> frames;  // innermost first, as the key's stacks
  for (uint64_t address : key.kernel) AddFrames(key.pid, address, true, &frames);
  for (uint64_t address : key.user) AddFrames(key.pid, address, false, &frames);
  std::reverse(frames.begin(), frames.end());
  const uint64_t iid = ++callstack_count_;
  ProtoBuilder interned = sequence_.Interned();
  const size_t callstack = interned.Begin(perfetto_field::kInternedCallstacks);
  interned.Varint(kIid, iid);
  for (uint64_t frame : frames) interned.Varint(kFrameIds, frame);
  interned.End(callstack);
  callstacks_[stack] = iid;
  return iid;
}

void PerfettoCallstacks::AddFrames(uint32_t pid, uint64_t address, bool kernel,
                                   std::vector<uint64_t>* frames) {
  const v1::SymbolTable::Mapping* mapping = kernel ? nullptr : stacks_.MappingOf(pid, address);
  const uint64_t mapping_iid =
      kernel ? KernelMapping() : mapping ? UserMapping(pid, *mapping) : 0;
  const uint64_t rel_pc =
      mapping ? address - mapping->start() + mapping->file_offset() : address;
  for (const NamedFrame& frame : stacks_.Frames(pid, address, kernel)) {
    if (IsTracerFrame(frame)) continue;
    frames->push_back(Frame(mapping_iid, rel_pc, frame.function, kernel));
  }
}

uint64_t PerfettoCallstacks::Frame(uint64_t mapping, uint64_t rel_pc, const std::string& function,
                                   bool kernel) {
  auto [it, added] = frames_.try_emplace({mapping, rel_pc, function}, frames_.size() + 1);
  if (!added) return it->second;
  const uint64_t name = sequence_.Intern(Strings::kFunctionNames, function);
  ProtoBuilder interned = sequence_.Interned();
  const size_t frame = interned.Begin(perfetto_field::kInternedFrames);
  interned.Varint(kIid, it->second);
  interned.Varint(kFunctionName, name);
  // Without a mapping (an address no symbol table placed) the frame is
  // known by its name alone.
  if (mapping != 0) {
    interned.Varint(kMapping, mapping);
    interned.Varint(kRelPc, rel_pc);
  }
  interned.Varint(kKind, kernel ? kKernel : kNative);
  interned.End(frame);
  return it->second;
}

uint64_t PerfettoCallstacks::UserMapping(uint32_t pid, const v1::SymbolTable::Mapping& mapping) {
  auto [it, added] = mappings_.try_emplace({pid, mapping.start(), mapping.path()}, 0);
  if (!added) return it->second;
  it->second = ++mapping_count_;
  const uint64_t path = sequence_.Intern(Strings::kMappingPaths, mapping.path());
  const uint64_t build_id =
      mapping.build_id().empty() ? 0 : sequence_.Intern(Strings::kBuildIds, mapping.build_id());
  ProtoBuilder interned = sequence_.Interned();
  const size_t entry = interned.Begin(perfetto_field::kInternedMappings);
  interned.Varint(kIid, it->second);
  if (build_id != 0) interned.Varint(kBuildId, build_id);
  interned.Varint(kStart, mapping.start());
  interned.Varint(kEnd, mapping.end());
  interned.Varint(kStartOffset, mapping.file_offset());
  interned.Varint(kExactOffset, mapping.file_offset());
  interned.Varint(kPath, path);
  interned.End(entry);
  return it->second;
}

// Perfetto's profilers name the kernel's mapping "/kernel" and give it no
// range; kernel frames' rel_pc is then the address itself.
uint64_t PerfettoCallstacks::KernelMapping() {
  if (kernel_mapping_ != 0) return kernel_mapping_;
  kernel_mapping_ = ++mapping_count_;
  const uint64_t path = sequence_.Intern(Strings::kMappingPaths, "kernel");
  ProtoBuilder interned = sequence_.Interned();
  const size_t entry = interned.Begin(perfetto_field::kInternedMappings);
  interned.Varint(kIid, kernel_mapping_);
  interned.Varint(kPath, path);
  interned.End(entry);
  return kernel_mapping_;
}

}  // namespace loupe::analysis
