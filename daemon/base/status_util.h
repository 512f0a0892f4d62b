// Small helpers for absl::Status: errno conversion and message access.
#ifndef LOUPE_DAEMON_BASE_STATUS_UTIL_H_
#define LOUPE_DAEMON_BASE_STATUS_UTIL_H_

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/status/status.h"

namespace loupe {

// ErrnoStatus("open", path) -> "open /x/y: No such file or directory"
inline absl::Status ErrnoStatus(std::string_view operation, std::string_view object,
                                int error = errno) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      fmt::format("{} {}: {}", operation, object, std::strerror(error)));
}

// The message as std::string_view: Debian's Abseil has its own string_view.
inline std::string_view MessageOf(const absl::Status& status) {
  return {status.message().data(), status.message().size()};
}

}  // namespace loupe

#endif  // LOUPE_DAEMON_BASE_STATUS_UTIL_H_
