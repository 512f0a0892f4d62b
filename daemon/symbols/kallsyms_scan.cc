#include "daemon/symbols/kallsyms_scan.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <string>
#include <vector>

#include "daemon/base/scoped_fd.h"

namespace loupe::symbols {
namespace {

class Scanner {
 public:
  Scanner(std::string_view function, std::string_view variable)
      : function_(function), variable_(variable) {}

  void Line(std::string_view line) {
    const size_t type_at = line.find(' ');
    if (type_at == std::string_view::npos || type_at + 3 > line.size()) return;
    const char type = line[type_at + 1];
    std::string_view name = line.substr(type_at + 3);
    name = name.substr(0, name.find('\t'));  // "\t[module]" follows module symbols
    if (name == variable_) facts_.variable_listed = true;
    if (type != 't' && type != 'T') return;
    uint64_t address = 0;
    const auto [end, error] = std::from_chars(line.data(), line.data() + type_at, address, 16);
    if (error != std::errc() || address == 0) return;
    text_.push_back(address);
    if (name == function_ && start_ == 0) start_ = address;
  }

  KallsymsFacts Finish() {
    if (start_ != 0) {
      // Lines are not wholly sorted (modules follow the core kernel).
      uint64_t next = UINT64_MAX;
      for (uint64_t address : text_) {
        if (address > start_ && address < next) next = address;
      }
      if (next != UINT64_MAX) facts_.function_range = std::pair{start_, next};
    }
    return facts_;
  }

 private:
  std::string_view function_, variable_;
  std::vector<uint64_t> text_;  // addresses only: names would be tens of MB
  uint64_t start_ = 0;
  KallsymsFacts facts_;
};

}  // namespace

KallsymsFacts ScanKallsyms(int fd, std::string_view function, std::string_view variable) {
  Scanner scanner(function, variable);
  std::string buffer(256 << 10, '\0');
  size_t held = 0;  // bytes of an unfinished line kept at the buffer's start
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data() + held, buffer.size() - held);
    if (got <= 0) break;
    const std::string_view text(buffer.data(), held + static_cast<size_t>(got));
    size_t line_start = 0;
    for (size_t newline; (newline = text.find('\n', line_start)) != std::string_view::npos;
         line_start = newline + 1) {
      scanner.Line(text.substr(line_start, newline - line_start));
    }
    held = text.size() - line_start;
    if (held == buffer.size()) held = 0;  // a line longer than the buffer: not kallsyms
    std::copy(buffer.begin() + static_cast<ptrdiff_t>(line_start),
              buffer.begin() + static_cast<ptrdiff_t>(line_start + held), buffer.begin());
  }
  if (held > 0) scanner.Line(std::string_view(buffer.data(), held));
  return scanner.Finish();
}

KallsymsFacts ScanKallsyms(std::string_view function, std::string_view variable) {
  ScopedFd fd(::open("/proc/kallsyms", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return {};
  return ScanKallsyms(fd.get(), function, variable);
}

}  // namespace loupe::symbols
