// How segment files are named in a writer's folder: `<session>-<seq>.loupe`
// once sealed, `<session>-<seq>.loupe.active` while written. The writer, the
// shipper and the readers agree through this header.
#ifndef LOUPE_DAEMON_FORMAT_SEGMENT_FILES_H_
#define LOUPE_DAEMON_FORMAT_SEGMENT_FILES_H_

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loupe::format {

inline constexpr std::string_view kSealedSuffix = ".loupe";
inline constexpr std::string_view kActiveSuffix = ".loupe.active";

struct SegmentFileName {
  std::string_view session;
  uint64_t sequence = 0;
  bool active = false;
};

// Session ids may hold '-', so the sequence is what follows the last one.
inline std::optional<SegmentFileName> ParseSegmentFileName(std::string_view name) {
  SegmentFileName parsed;
  if (name.ends_with(kActiveSuffix)) {
    parsed.active = true;
    name.remove_suffix(kActiveSuffix.size());
  } else if (name.ends_with(kSealedSuffix)) {
    name.remove_suffix(kSealedSuffix.size());
  } else {
    return std::nullopt;
  }
  const size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == name.size()) return std::nullopt;
  const std::string_view digits = name.substr(dash + 1);
  auto [end, error] =
      std::from_chars(digits.data(), digits.data() + digits.size(), parsed.sequence);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  parsed.session = name.substr(0, dash);
  return parsed;
}

}  // namespace loupe::format

#endif  // LOUPE_DAEMON_FORMAT_SEGMENT_FILES_H_
