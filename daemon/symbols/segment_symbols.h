// The addresses one segment's stacks use, and the symbol table written into
// the segment when it is sealed: per user address its mapping (path, build
// id, file offset) and source frames, per kernel address its function. The
// raw addresses and build ids stay, so a collector can symbolize again.
#ifndef LOUPE_DAEMON_SYMBOLS_SEGMENT_SYMBOLS_H_
#define LOUPE_DAEMON_SYMBOLS_SEGMENT_SYMBOLS_H_

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "daemon/symbols/address_spaces.h"
#include "daemon/symbols/symbolizer.h"
#include "loupe/v1/trace.pb.h"

namespace loupe::symbols {

class SegmentSymbols {
 public:
  void AddUser(uint32_t pid, uint64_t address, Location location);
  void AddKernel(uint64_t address) { kernel_.insert(address); }
  bool empty() const { return user_.empty() && kernel_.empty(); }

  // Reads only what `symbolizer` has resolved; the rest keep their mapping
  // and build id, and a note counts them.
  v1::SymbolTable Build(Symbolizer& symbolizer) const;
  void Clear();

 private:
  std::map<std::pair<uint32_t, uint64_t>, Location> user_;
  std::set<uint64_t> kernel_;
};

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_SEGMENT_SYMBOLS_H_
