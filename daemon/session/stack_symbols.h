// The symbols of a session's stacks: each distinct stack of the open segment
// once, its user frames located in the process's mappings (read while the
// process lives) and handed to the symbolizer thread, its kernel frames
// noted; at seal, the segment's symbol table.
#ifndef LOUPE_DAEMON_SESSION_STACK_SYMBOLS_H_
#define LOUPE_DAEMON_SESSION_STACK_SYMBOLS_H_

#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_set.h"
#include "daemon/session/owned_event.h"
#include "daemon/symbols/address_spaces.h"
#include "daemon/symbols/segment_symbols.h"
#include "daemon/symbols/symbolizer.h"
#include "loupe/v1/trace.pb.h"

namespace loupe::session {

class StackSymbols {
 public:
  StackSymbols() : symbolizer_(std::make_unique<symbols::Symbolizer>()) {}

  // Reads `pid`'s mappings now (a new target, an exec).
  void Snapshot(uint32_t pid, uint64_t now_ns, bool exec = false) {
    address_spaces_.Snapshot(pid, now_ns, exec);
  }
  // A followed child's, or its parent's when it is gone already.
  void Forked(uint32_t parent, uint32_t child, uint64_t now_ns) {
    address_spaces_.Forked(parent, child, now_ns);
  }
  // Notes the frames of a sample or off-CPU interval.
  void Collect(const OwnedEvent& event);
  // The open segment's table; the next segment starts empty.
  v1::SymbolTable Seal();
  // Before the last seal: lets the symbolizer finish what it was handed.
  // False when it did not within `timeout_ns`.
  bool WaitIdle(uint64_t timeout_ns) { return symbolizer_->WaitIdle(timeout_ns); }

 private:
  symbols::AddressSpaces address_spaces_;
  std::unique_ptr<symbols::Symbolizer> symbolizer_;
  symbols::SegmentSymbols segment_symbols_;    // of the open segment
  absl::flat_hash_set<uint64_t> seen_stacks_;  // of the open segment, by hash
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_STACK_SYMBOLS_H_
