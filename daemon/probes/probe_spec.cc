#include "daemon/probes/probe_spec.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <cctype>
#include <charconv>

#include "shared/records.h"

namespace loupe::probes {
namespace {

bool ParseNumber(std::string_view text, uint64_t* out) {
  int base = 10;
  if (text.starts_with("0x") || text.starts_with("0X")) {
    base = 16;
    text.remove_prefix(2);
  }
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out, base);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

bool IsName(std::string_view text, bool globs) {
  if (text.empty()) return false;
  for (char c : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' ||
                    c == '-' || (globs && (c == '*' || c == '?'));
    if (!ok) return false;
  }
  return true;
}

// A symbol as linkers write them: C and mangled C++ names, and Go's
// (net/http.(*conn).serve, main.F[...], runtime·x): anything printable but
// the separators of the spec itself.
bool IsSymbol(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f || c == ':' || c == '+' || c == '%') return false;
  }
  return true;
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view text) {
  return fnmatch(std::string(pattern).c_str(), std::string(text).c_str(), 0) == 0;
}

absl::StatusOr<UsdtRequest> ParseUsdtRequest(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        fmt::format("--usdt '{}': {} (expected provider:name, globs allowed, optionally "
                    "'(str argN)')",
                    text, why));
  };
  UsdtRequest request{.text = std::string(text)};
  std::string_view rest = text;
  if (const size_t open = rest.find('('); open != std::string_view::npos) {
    if (rest.back() != ')') return bad("unclosed '('");
    const std::string_view inside = rest.substr(open + 1, rest.size() - open - 2);
    uint64_t index = 0;
    if (!inside.starts_with("str arg") || !ParseNumber(inside.substr(7), &index) ||
        index >= LOUPE_USDT_MAX_ARGS) {
      return bad(fmt::format("'{}' is not 'str argN' with N below {}", inside,
                             LOUPE_USDT_MAX_ARGS));
    }
    request.string_arg = static_cast<int>(index);
    rest = rest.substr(0, open);
  }
  const size_t colon = rest.find(':');
  if (colon == std::string_view::npos) return bad("no ':' between provider and name");
  request.provider = std::string(rest.substr(0, colon));
  request.name = std::string(rest.substr(colon + 1));
  if (!IsName(request.provider, true) || !IsName(request.name, true)) {
    return bad("provider and name are letters, digits, '_', '.', '-', '*' or '?'");
  }
  return request;
}

absl::StatusOr<UprobeRequest> ParseUprobeRequest(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(fmt::format(
        "--uprobe '{}': {} (expected TARGET:SYMBOL[+OFFSET][(N)][%return], or TARGET+0xOFFSET"
        "[(N)][%return] for the function containing a frame as stacks print it)",
        text, why));
  };
  UprobeRequest request{.text = std::string(text)};
  std::string_view rest = text;
  if (rest.ends_with("%return")) {
    request.with_return = true;
    rest.remove_suffix(7);
  } else if (const size_t percent = rest.rfind('%');
             percent != std::string_view::npos && percent > rest.rfind(':')) {
    return bad(fmt::format("unknown suffix '{}': the only one is %return", rest.substr(percent)));
  }
  if (rest.ends_with(")")) {
    const size_t open = rest.rfind('(');
    uint64_t count = 0;
    if (open == std::string_view::npos ||
        !ParseNumber(rest.substr(open + 1, rest.size() - open - 2), &count) ||
        count > LOUPE_UPROBE_MAX_ARGS) {
      return bad(fmt::format("the argument count must be a number from 0 to {}",
                             LOUPE_UPROBE_MAX_ARGS));
    }
    request.arg_count = static_cast<uint32_t>(count);
    rest = rest.substr(0, open);
  }
  const size_t colon = rest.rfind(':');
  if (const size_t plus = rest.rfind('+');
      colon == std::string_view::npos && plus != std::string_view::npos && plus != 0) {
    uint64_t offset = 0;
    if (!rest.substr(plus + 1).starts_with("0x") || !ParseNumber(rest.substr(plus + 1), &offset)) {
      return bad("the file offset after '+' is not a hexadecimal number (0x...)");
    }
    request.target = std::string(rest.substr(0, plus));
    request.frame_offset = offset;
    request.frame = std::string(rest);
    return request;
  }
  if (colon == std::string_view::npos || colon == 0) {
    return bad("no TARGET: before the symbol");
  }
  request.target = std::string(rest.substr(0, colon));
  std::string_view symbol = rest.substr(colon + 1);
  if (const size_t plus = symbol.find('+'); plus != std::string_view::npos) {
    if (!ParseNumber(symbol.substr(plus + 1), &request.offset)) {
      return bad("the offset after '+' is not a number");
    }
    symbol = symbol.substr(0, plus);
  }
  if (!IsSymbol(symbol)) return bad("the symbol is empty or has a space or a control character");
  request.symbol = std::string(symbol);
  return request;
}

}  // namespace loupe::probes
