#include "daemon/session/stack_symbols.h"

#include <algorithm>

#include "absl/hash/hash.h"

namespace loupe::session {

void StackSymbols::Collect(const OwnedEvent& event) {
  if (event.frames.empty()) return;
  const uint32_t pid = event.prev_tgid;
  if (!seen_stacks_
           .insert(absl::HashOf(pid, absl::MakeConstSpan(event.frames),
                                absl::MakeConstSpan(event.exact_frames())))
           .second) {
    return;
  }
  for (size_t i = 0; i < event.frames.size(); ++i) {
    const uint64_t address = event.frames[i];
    if (i >= event.user_depth) {
      segment_symbols_.AddKernel(address);
      continue;
    }
    if (address == format::kUnwindStoppedFrame) continue;  // readers name it
    // A caller's frame is a return address: the call is the instruction
    // before it, and symbolizing the return address itself can name the
    // line (or an inlined function) after the call instead. The leaf and
    // the code a signal interrupted are where they were.
    const bool exact = i == 0 || std::ranges::find(event.exact_frames(), i) != event.exact_frames().end();
    const uint64_t call_site = exact ? address : address - 1;
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
