// Durations as people type them on the command line.
#ifndef LOUPE_TOOLS_TRACECTL_DURATIONS_H_
#define LOUPE_TOOLS_TRACECTL_DURATIONS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace loupe::tracectl {

// "10s", "250ms", "1.5s", "20us", "2m", "1h", or bare seconds, in
// nanoseconds (a fraction beyond the nanosecond is dropped); `flag` names
// the option in the error. Zero is refused unless `zero_ok`.
absl::StatusOr<uint64_t> ParseDuration(const std::string& text, std::string_view flag,
                                       bool zero_ok = false);

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_DURATIONS_H_
