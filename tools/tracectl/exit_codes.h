// tracectl's exit codes, and the one place a Status becomes one stderr line.
#ifndef LOUPE_TOOLS_TRACECTL_EXIT_CODES_H_
#define LOUPE_TOOLS_TRACECTL_EXIT_CODES_H_

#include <fmt/format.h>

#include "absl/status/status.h"
#include "daemon/base/status_util.h"

namespace loupe::tracectl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitIncomplete = 1;  // the trace lost something or is damaged
inline constexpr int kExitError = 2;       // the command could not do its job

inline int Fail(const absl::Status& status) {
  fmt::print(stderr, "tracectl: {}\n", MessageOf(status));
  return kExitError;
}

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_EXIT_CODES_H_
