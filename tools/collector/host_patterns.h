// The host names a client is granted, as the tokens file writes them:
// `web-*,db-1`. '*' stands for any run of characters (none too); every
// other character matches itself. Only '*' is special so that whether two
// grants can name the same host is decidable exactly (Overlap).
#ifndef LOUPE_TOOLS_COLLECTOR_HOST_PATTERNS_H_
#define LOUPE_TOOLS_COLLECTOR_HOST_PATTERNS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace loupe::collector {

class HostPatterns {
 public:
  HostPatterns() = default;  // no host
  // A comma-separated list; empty: no host at all.
  static absl::StatusOr<HostPatterns> Parse(std::string_view list);
  static HostPatterns Any() { return HostPatterns({"*"}); }
  // Letters, digits, '-', '_', '.', as a segment's host may be named.
  static bool IsHostName(std::string_view text);

  bool Matches(std::string_view host) const;
  bool empty() const { return patterns_.empty(); }
  // A pattern of each list that some one host matches, if there is one.
  std::optional<std::pair<std::string, std::string>> Overlap(const HostPatterns& other) const;
  // As written in the tokens file, or "(none)".
  std::string ToString() const;

 private:
  explicit HostPatterns(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {}
  std::vector<std::string> patterns_;
};

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_HOST_PATTERNS_H_
