// Names of JIT-compiled code from the perf map a runtime writes,
// /tmp/perf-<pid>.map: one "START SIZE NAME" line (hex) per function.
#ifndef LOUPE_DAEMON_SYMBOLS_PERF_MAP_H_
#define LOUPE_DAEMON_SYMBOLS_PERF_MAP_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loupe::symbols {

class PerfMap {
 public:
  explicit PerfMap(std::string_view text);  // lines that do not parse are skipped
  // The target's map, read through its root; empty when it has none.
  static PerfMap Load(uint32_t pid);

  std::string Name(uint64_t address) const;  // "" when no entry covers it
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    uint64_t start, size;
    std::string name;
  };
  std::vector<Entry> entries_;  // sorted by start
};

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_PERF_MAP_H_
