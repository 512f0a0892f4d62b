#include "daemon/session/stack_symbols.h"

#include "absl/hash/hash.h"

namespace loupe::session {

void StackSymbols::Collect(const OwnedEvent& event) {
  if (event.frames.empty()) return;
  const uint32_t pid = event.prev_tgid;
  if (!seen_stacks_.insert(absl::HashOf(pid, absl::MakeConstSpan(event.frames))).second) return;
  for (size_t i = 0; i < event.frames.size(); ++i) {
    const uint64_t address = event.frames[i];
    if (i >= event.user_depth) {
      segment_symbols_.AddKernel(address);
      continue;
    }
    // A caller's frame is a return address: the call is the instruction
    // before it, and symbolizing the return address itself can name the
    // line (or an inlined function) after the call instead.
    const uint64_t call_site = i == 0 ? address : address - 1;
    symbols::Location location = address_spaces_.Locate(pid, call_site, event.record.time_ns);
    if (location.object != nullptr) symbolizer_->Prefetch(location.object, location.file_offset);
    segment_symbols_.AddUser(pid, address, std::move(location));
  }
}

v1::SymbolTable StackSymbols::Seal() {
  v1::SymbolTable table = segment_symbols_.Build(*symbolizer_);
  segment_symbols_.Clear();
  seen_stacks_.clear();
  return table;
}

}  // namespace loupe::session
