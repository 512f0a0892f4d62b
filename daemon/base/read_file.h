// A whole small file (a /proc entry) read with read(2). std::ifstream read
// through istreambuf_iterator throws when a read fails — as reading
// /proc/<pid>/maps does with ESRCH once the process has exited — and the
// exception would take the daemon down with every session in it.
#ifndef LOUPE_DAEMON_BASE_READ_FILE_H_
#define LOUPE_DAEMON_BASE_READ_FILE_H_

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"

namespace loupe {

inline absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  std::string text;
  char chunk[16 << 10];
  for (;;) {
    const ssize_t got = ::read(fd.get(), chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoStatus("read", path);
    if (got == 0) return text;
    text.append(chunk, static_cast<size_t>(got));
  }
}

}  // namespace loupe

#endif  // LOUPE_DAEMON_BASE_READ_FILE_H_
