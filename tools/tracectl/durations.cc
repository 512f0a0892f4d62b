#include "tools/tracectl/durations.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>

namespace loupe::tracectl {

absl::StatusOr<uint64_t> ParseDuration(const std::string& text, std::string_view flag,
                                       bool zero_ok) {
  // A whole part, an optional fraction and a unit; a bare number is seconds.
  uint64_t whole = 0;
  const char* const end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data(), end, whole);
  uint64_t fraction = 0, fraction_scale = 1;
  if (ec == std::errc() && at != end && *at == '.') {
    for (++at; at != end && *at >= '0' && *at <= '9' && fraction_scale < 1'000'000'000; ++at) {
      fraction = fraction * 10 + static_cast<uint64_t>(*at - '0');
      fraction_scale *= 10;
    }
  }
  const std::string_view suffix(at, static_cast<size_t>(end - at));
  uint64_t scale = 0;
  if (suffix.empty() || suffix == "s") scale = 1'000'000'000;
  if (suffix == "ms") scale = 1'000'000;
  if (suffix == "us" || suffix == "µs") scale = 1'000;
  if (suffix == "ns") scale = 1;
  if (suffix == "m") scale = 60'000'000'000;
  if (suffix == "h") scale = 3'600'000'000'000;
  if (ec != std::errc() || scale == 0) {
    return absl::InvalidArgumentError(fmt::format(
        "{} '{}': expected a {}number with a unit: ns, us, ms, s, m or h (a bare number is "
        "seconds), e.g. 20ms or 1.5s",
        flag, text, zero_ok ? "" : "positive "));
  }
  if (whole > UINT64_MAX / scale / 2) {
    return absl::InvalidArgumentError(
        fmt::format("{} '{}': too long (at most {} h)", flag, text, UINT64_MAX / 2 / 3'600'000'000'000));
  }
  const uint64_t ns = whole * scale + fraction * scale / fraction_scale;
  if (ns == 0 && !zero_ok) {
    return absl::InvalidArgumentError(
        fmt::format("{} '{}': must be longer than zero (and at least 1 ns)", flag, text));
  }
  return ns;
}

}  // namespace loupe::tracectl
