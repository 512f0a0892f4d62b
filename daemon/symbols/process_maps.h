// A process's memory map as /proc/<pid>/maps states it, parsed, and the
// lookup of the mapping an address falls in.
#ifndef LOUPE_DAEMON_SYMBOLS_PROCESS_MAPS_H_
#define LOUPE_DAEMON_SYMBOLS_PROCESS_MAPS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loupe::symbols {

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;  // file offset of `start`
  bool executable = false;
  uint64_t device = 0;  // major << 32 | minor
  uint64_t inode = 0;
  std::string path;     // "" for anonymous memory, "[vdso]" and the like as given
  bool deleted = false;  // the file was deleted or replaced after mapping

  bool is_file() const { return inode != 0 && path.starts_with('/'); }
  bool IsVdso() const { return path == "[vdso]"; }
  // Code with an ELF image louped can open: a file, or the vDSO.
  bool HasObject() const { return executable && (is_file() || IsVdso()); }
};

// Lines that do not parse are skipped; sorted by start.
std::vector<Mapping> ParseProcMaps(std::string_view text);
absl::StatusOr<std::vector<Mapping>> ReadProcMaps(uint32_t pid);

// The mapping containing `address`, or nullptr. `mappings` sorted by start.
const Mapping* FindMapping(const std::vector<Mapping>& mappings, uint64_t address);

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_PROCESS_MAPS_H_
