// An executable or library a target maps, opened while the target lives:
// through /proc/<pid>/map_files (which still reaches a deleted or replaced
// file) or else through the target's own root (/proc/<pid>/root, so files
// in another mount namespace, e.g. a container's, are found). The open
// descriptor keeps the file readable after the target exits.
#ifndef LOUPE_DAEMON_SYMBOLS_OBJECT_FILE_H_
#define LOUPE_DAEMON_SYMBOLS_OBJECT_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/base/scoped_fd.h"
#include "daemon/symbols/process_maps.h"

namespace loupe::symbols {

struct ObjectFile {
  std::string path;       // as the target mapped it
  std::string debug_dir;  // where to look for a .gnu_debuglink file, through the target's root
  std::string build_id;   // raw bytes of NT_GNU_BUILD_ID, empty when there is none
  ScopedFd fd;
};

// The vDSO ("[vdso]") opens as a copy of louped's own.
absl::StatusOr<ObjectFile> OpenObject(uint32_t pid, const Mapping& mapping);

// The GNU build id of an ELF file, or "" (also for what is not ELF).
std::string ReadBuildId(int fd);
std::string HexOf(const std::string& bytes);

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_OBJECT_FILE_H_
