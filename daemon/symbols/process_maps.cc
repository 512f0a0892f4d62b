#include "daemon/symbols/process_maps.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "daemon/base/proc_root.h"
#include "daemon/base/read_file.h"

namespace loupe::symbols {
namespace {

bool Hex(std::string_view text, uint64_t* out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out, 16);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

// Splits off the next space-separated field.
std::string_view NextField(std::string_view* line) {
  const size_t start = line->find_first_not_of(' ');
  if (start == std::string_view::npos) {
    *line = {};
    return {};
  }
  line->remove_prefix(start);
  const size_t end = std::min(line->find(' '), line->size());
  std::string_view field = line->substr(0, end);
  line->remove_prefix(end);
  return field;
}

bool ParseLine(std::string_view line, Mapping* out) {
  const std::string_view range = NextField(&line), perms = NextField(&line),
                         offset = NextField(&line), device = NextField(&line),
                         inode = NextField(&line);
  const size_t dash = range.find('-'), colon = device.find(':');
  uint64_t major = 0, minor = 0;
  if (dash == std::string_view::npos || colon == std::string_view::npos || perms.size() < 4 ||
      !Hex(range.substr(0, dash), &out->start) || !Hex(range.substr(dash + 1), &out->end) ||
      out->end <= out->start || !Hex(offset, &out->offset) || !Hex(device.substr(0, colon), &major) ||
      !Hex(device.substr(colon + 1), &minor)) {
    return false;
  }
  auto [end, error] = std::from_chars(inode.data(), inode.data() + inode.size(), out->inode);
  if (inode.empty() || error != std::errc() || end != inode.data() + inode.size()) return false;
  out->device = major << 32 | minor;
  out->executable = perms[2] == 'x';
  const size_t path_start = line.find_first_not_of(' ');
  out->path = path_start == std::string_view::npos ? "" : std::string(line.substr(path_start));
  constexpr std::string_view kDeleted = " (deleted)";
  out->deleted = out->path.ends_with(kDeleted);
  if (out->deleted) out->path.resize(out->path.size() - kDeleted.size());
  return true;
}

}  // namespace

std::vector<Mapping> ParseProcMaps(std::string_view text) {
  std::vector<Mapping> mappings;
  while (!text.empty()) {
    const size_t newline = std::min(text.find('\n'), text.size());
    Mapping mapping;
    if (ParseLine(text.substr(0, newline), &mapping)) mappings.push_back(std::move(mapping));
    text.remove_prefix(std::min(newline + 1, text.size()));
  }
  std::sort(mappings.begin(), mappings.end(),
            [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  return mappings;
}

absl::StatusOr<std::vector<Mapping>> ReadProcMaps(uint32_t pid) {
  absl::StatusOr<std::string> text = ReadWholeFile(ProcPath(pid, "/maps"));
  if (!text.ok()) return text.status();
  return ParseProcMaps(*text);
}

const Mapping* FindMapping(const std::vector<Mapping>& mappings, uint64_t address) {
  auto after = std::upper_bound(mappings.begin(), mappings.end(), address,
                                [](uint64_t a, const Mapping& m) { return a < m.start; });
  if (after == mappings.begin()) return nullptr;
  const Mapping& candidate = *std::prev(after);
  return address < candidate.end ? &candidate : nullptr;
}

}  // namespace loupe::symbols
