#include "tools/collector/host_patterns.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

namespace loupe::collector {
namespace {

constexpr size_t kMaxHostChars = 253;

bool HostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// Whether `pattern` matches all of `text`. On a mismatch after a '*', that
// '*' takes one more character and the rest is tried again; only the last
// '*' ever needs to, so this is linear in practice and O(n·m) at worst.
bool GlobMatches(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0;
  size_t star = std::string_view::npos, star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// Whether some one string matches both patterns. can[i][j]: the suffixes
// a[i..] and b[j..] have a common match. A '*' either ends (skipped) or
// takes the other side's next symbol — a character, or a '*' matching
// nothing.
bool GlobsIntersect(std::string_view a, std::string_view b) {
  std::vector<std::vector<char>> can(a.size() + 1, std::vector<char>(b.size() + 1, 0));
  for (size_t i = a.size() + 1; i-- > 0;) {
    for (size_t j = b.size() + 1; j-- > 0;) {
      const bool a_end = i == a.size(), b_end = j == b.size();
      bool both;
      if (a_end && b_end) {
        both = true;
      } else if (!a_end && a[i] == '*') {
        both = can[i + 1][j] || (!b_end && can[i][j + 1]);
      } else if (!b_end && b[j] == '*') {
        both = can[i][j + 1] || (!a_end && can[i + 1][j]);
      } else {
        both = !a_end && !b_end && a[i] == b[j] && can[i + 1][j + 1];
      }
      can[i][j] = both;
    }
  }
  return can[0][0];
}

}  // namespace

bool HostPatterns::IsHostName(std::string_view text) {
  return !text.empty() && text.size() <= kMaxHostChars && text.front() != '.' &&
         std::all_of(text.begin(), text.end(), HostChar);
}

absl::StatusOr<HostPatterns> HostPatterns::Parse(std::string_view list) {
  std::vector<std::string> patterns;
  if (list.empty()) return HostPatterns();
  for (bool more = true; more;) {
    const size_t comma = list.find(',');
    const std::string_view pattern = list.substr(0, comma);
    more = comma != std::string_view::npos;
    list.remove_prefix(more ? comma + 1 : list.size());
    const bool valid = !pattern.empty() && pattern.size() <= kMaxHostChars &&
                       pattern.front() != '.' &&
                       std::all_of(pattern.begin(), pattern.end(),
                                   [](char c) { return HostChar(c) || c == '*'; });
    if (!valid) {
      return absl::InvalidArgumentError(fmt::format(
          "host pattern '{}': must be letters, digits, '-', '_', '.' and '*' (any run of "
          "characters), separated by ','",
          pattern));
    }
    patterns.emplace_back(pattern);
  }
  return HostPatterns(std::move(patterns));
}

bool HostPatterns::Matches(std::string_view host) const {
  return std::any_of(patterns_.begin(), patterns_.end(),
                     [&](const std::string& pattern) { return GlobMatches(pattern, host); });
}

std::optional<std::pair<std::string, std::string>> HostPatterns::Overlap(
    const HostPatterns& other) const {
  for (const std::string& mine : patterns_) {
    for (const std::string& theirs : other.patterns_) {
      if (GlobsIntersect(mine, theirs)) return std::pair{mine, theirs};
    }
  }
  return std::nullopt;
}

std::string HostPatterns::ToString() const {
  return patterns_.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(patterns_, ","));
}

}  // namespace loupe::collector
