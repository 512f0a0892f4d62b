// Reading /proc/kallsyms as a stream of parsed lines, and what a session's
// start needs from it found in one pass. The kernel formats the file anew
// for every reader (~100 ms for 120 k lines) and the whole text is several
// MB, so it is read once, in chunks, without keeping the text.
#ifndef LOUPE_DAEMON_SYMBOLS_KALLSYMS_SCAN_H_
#define LOUPE_DAEMON_SYMBOLS_KALLSYMS_SCAN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace loupe::symbols {

// One "ADDRESS TYPE NAME[\t[MODULE]]" line; the views point into the line.
struct KallsymsLine {
  uint64_t address = 0;  // 0 when kptr_restrict hides it
  char type = 0;
  std::string_view name;
  std::string_view module;  // without its brackets; empty for the core kernel
  bool IsText() const { return type == 't' || type == 'T' || type == 'w' || type == 'W'; }
};

std::optional<KallsymsLine> ParseKallsymsLine(std::string_view line);
// Calls `line` for every well-formed line read from `fd`.
void ForEachKallsymsLine(int fd, const std::function<void(const KallsymsLine&)>& line);

// The kernel text `function` occupies: its address up to the next
// function's; nullopt when it is not listed or addresses are hidden.
using TextRange = std::pair<uint64_t, uint64_t>;
std::optional<TextRange> KallsymsFunctionRange(int fd, std::string_view function);
// The same from /proc/kallsyms (nothing found when it cannot be read).
std::optional<TextRange> KallsymsFunctionRange(std::string_view function);
// Several functions' in one pass (one element per function, in order).
std::vector<std::optional<TextRange>> KallsymsFunctionRanges(
    int fd, std::span<const std::string_view> functions);
std::vector<std::optional<TextRange>> KallsymsFunctionRanges(
    std::span<const std::string_view> functions);

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_KALLSYMS_SCAN_H_
