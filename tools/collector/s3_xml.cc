#include "tools/collector/s3_xml.h"

#include <array>
#include <utility>

namespace loupe::collector {
namespace {

constexpr std::array<std::pair<std::string_view, char>, 5> kEntities = {{
    {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}}};

// The position just past the opening tag `<name>` or `<name ...>` at or
// after `from`, or npos.
size_t OpenTagEnd(std::string_view xml, std::string_view name, size_t from) {
  for (size_t at; (at = xml.find('<', from)) != std::string_view::npos; from = at + 1) {
    const std::string_view rest = xml.substr(at + 1);
    if (!rest.starts_with(name) || rest.size() == name.size()) continue;
    const char after = rest[name.size()];
    if (after != '>' && after != ' ') continue;
    const size_t close = xml.find('>', at);
    return close == std::string_view::npos ? close : close + 1;
  }
  return std::string_view::npos;
}

}  // namespace

std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view name) {
  std::vector<std::string_view> found;
  const std::string close = "</" + std::string(name) + ">";
  for (size_t from = 0;;) {
    const size_t start = OpenTagEnd(xml, name, from);
    if (start == std::string_view::npos) break;
    const size_t end = xml.find(close, start);
    if (end == std::string_view::npos) break;
    found.push_back(xml.substr(start, end - start));
    from = end + close.size();
  }
  return found;
}

std::string XmlText(std::string_view xml, std::string_view name) {
  const std::vector<std::string_view> elements = XmlElements(xml, name);
  if (elements.empty()) return {};
  std::string text;
  std::string_view rest = elements.front();
  while (!rest.empty()) {
    bool decoded = false;
    for (const auto& [entity, character] : kEntities) {
      if (rest.starts_with(entity)) {
        text.push_back(character);
        rest.remove_prefix(entity.size());
        decoded = true;
        break;
      }
    }
    if (!decoded) {
      text.push_back(rest.front());
      rest.remove_prefix(1);
    }
  }
  return text;
}

std::string XmlEscape(std::string_view text) {
  std::string escaped;
  for (char c : text) {
    bool replaced = false;
    for (const auto& [entity, character] : kEntities) {
      if (c == character) {
        escaped.append(entity);
        replaced = true;
        break;
      }
    }
    if (!replaced) escaped.push_back(c);
  }
  return escaped;
}

}  // namespace loupe::collector
