#include "tools/tracectl/durations.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>

namespace loupe::tracectl {

absl::StatusOr<uint64_t> ParseDuration(const std::string& text, std::string_view flag,
                                       bool zero_ok) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [unit, ec] = std::from_chars(text.data(), end, value);
  const std::string_view suffix(unit, static_cast<size_t>(end - unit));
  uint64_t scale = 0;
  if (suffix.empty() || suffix == "s") scale = 1'000'000'000;
  if (suffix == "ms") scale = 1'000'000;
  if (suffix == "m") scale = 60'000'000'000;
  if (suffix == "h") scale = 3'600'000'000'000;
  if (ec != std::errc() || scale == 0 || (value == 0 && !zero_ok)) {
    return absl::InvalidArgumentError(fmt::format(
        "{} '{}': expected a {} whole number with s, ms, m or h", flag, text,
        zero_ok ? "" : "positive"));
  }
  if (value > UINT64_MAX / scale) {
    return absl::InvalidArgumentError(
        fmt::format("{} '{}': too long (at most {} h)", flag, text, UINT64_MAX / 3'600'000'000'000));
  }
  return value * scale;
}

}  // namespace loupe::tracectl
