#include "daemon/symbols/kallsyms_scan.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "daemon/base/scoped_fd.h"

namespace loupe::symbols {

std::optional<KallsymsLine> ParseKallsymsLine(std::string_view line) {
  const size_t type_at = line.find(' ');
  if (type_at == 0 || type_at == std::string_view::npos || type_at + 3 > line.size() ||
      line[type_at + 2] != ' ') {
    return std::nullopt;
  }
  KallsymsLine parsed;
  const auto [end, error] =
      std::from_chars(line.data(), line.data() + type_at, parsed.address, 16);
  if (error != std::errc() || end != line.data() + type_at) return std::nullopt;
  parsed.type = line[type_at + 1];
  std::string_view name = line.substr(type_at + 3);
  if (const size_t tab = name.find('\t'); tab != std::string_view::npos) {
    std::string_view module = name.substr(tab + 1);
    if (module.size() >= 2 && module.front() == '[' && module.back() == ']') {
      parsed.module = module.substr(1, module.size() - 2);
    }
    name = name.substr(0, tab);
  }
  if (name.empty()) return std::nullopt;
  parsed.name = name;
  return parsed;
}

void ForEachKallsymsLine(int fd, const std::function<void(const KallsymsLine&)>& line) {
  auto parse = [&](std::string_view text) {
    if (std::optional<KallsymsLine> parsed = ParseKallsymsLine(text)) line(*parsed);
  };
  std::string buffer(256 << 10, '\0');
  size_t held = 0;  // bytes of an unfinished line kept at the buffer's start
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data() + held, buffer.size() - held);
    if (got <= 0) break;
    const std::string_view text(buffer.data(), held + static_cast<size_t>(got));
    size_t line_start = 0;
    for (size_t newline; (newline = text.find('\n', line_start)) != std::string_view::npos;
         line_start = newline + 1) {
      parse(text.substr(line_start, newline - line_start));
    }
    held = text.size() - line_start;
    if (held == buffer.size()) held = 0;  // a line longer than the buffer: not kallsyms
    std::copy(buffer.begin() + static_cast<ptrdiff_t>(line_start),
              buffer.begin() + static_cast<ptrdiff_t>(line_start + held), buffer.begin());
  }
  if (held > 0) parse(std::string_view(buffer.data(), held));
}

std::vector<std::optional<TextRange>> KallsymsFunctionRanges(
    int fd, std::span<const std::string_view> functions) {
  std::vector<uint64_t> text;  // addresses only: names would be tens of MB
  std::vector<uint64_t> starts(functions.size(), 0);
  ForEachKallsymsLine(fd, [&](const KallsymsLine& line) {
    if (line.address == 0 || (line.type != 't' && line.type != 'T')) return;
    text.push_back(line.address);
    if (!line.module.empty()) return;
    for (size_t i = 0; i < functions.size(); ++i) {
      if (line.name == functions[i] && starts[i] == 0) starts[i] = line.address;
    }
  });
  // Lines are not wholly sorted (modules follow the core kernel).
  std::sort(text.begin(), text.end());
  std::vector<std::optional<TextRange>> ranges(functions.size());
  for (size_t i = 0; i < functions.size(); ++i) {
    if (starts[i] == 0) continue;
    const auto next = std::upper_bound(text.begin(), text.end(), starts[i]);
    if (next != text.end()) ranges[i] = TextRange{starts[i], *next};
  }
  return ranges;
}

std::vector<std::optional<TextRange>> KallsymsFunctionRanges(
    std::span<const std::string_view> functions) {
  ScopedFd fd(::open("/proc/kallsyms", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::vector<std::optional<TextRange>>(functions.size());
  return KallsymsFunctionRanges(fd.get(), functions);
}

std::optional<TextRange> KallsymsFunctionRange(int fd, std::string_view function) {
  return KallsymsFunctionRanges(fd, std::span(&function, 1)).front();
}

std::optional<TextRange> KallsymsFunctionRange(std::string_view function) {
  return KallsymsFunctionRanges(std::span(&function, 1)).front();
}

}  // namespace loupe::symbols
