#include "daemon/symbols/perf_map.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "daemon/base/proc_root.h"
#include "daemon/base/scoped_fd.h"

namespace loupe::symbols {
namespace {

// A JIT's map of a few hundred thousand functions is tens of MiB at most.
constexpr off_t kMaxPerfMapBytes = 64 << 20;

bool Hex(std::string_view text, uint64_t* out) {
  if (text.starts_with("0x")) text.remove_prefix(2);
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out, 16);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

// The pid the process knows itself by (innermost NSpid): a JIT in a
// container names its map after that, in its own /tmp.
uint32_t OwnPid(uint32_t pid) {
  std::ifstream status(ProcPath(pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (!line.starts_with("NSpid:")) continue;
    const size_t last = line.find_last_of(" \t");
    return static_cast<uint32_t>(std::strtoul(line.c_str() + last + 1, nullptr, 10));
  }
  return pid;
}

}  // namespace

PerfMap::PerfMap(std::string_view text) {
  while (!text.empty()) {
    const size_t newline = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(std::min(newline + 1, text.size()));
    const size_t first = line.find(' ');
    const size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
    Entry entry;
    if (second == std::string_view::npos || !Hex(line.substr(0, first), &entry.start) ||
        !Hex(line.substr(first + 1, second - first - 1), &entry.size) || entry.size == 0) {
      continue;
    }
    entry.name = std::string(line.substr(second + 1));
    entries_.push_back(std::move(entry));
  }
  // Later lines win for the same start (code regenerated in place).
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.start < b.start; });
}

PerfMap PerfMap::Load(uint32_t pid) {
  // The file lies in the traced process's /tmp, where anyone may put
  // anything: only a regular file of the process's own user is read (as
  // perf does), never through a symlink, never blocking on a FIFO, and
  // never more than kMaxPerfMapBytes.
  struct stat process;
  if (::stat(ProcPath(pid).c_str(), &process) != 0) return PerfMap("");
  const std::string path = ProcPath(pid, fmt::format("/root/tmp/perf-{}.map", OwnPid(pid)));
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat file;
  if (!fd.valid() || ::fstat(fd.get(), &file) != 0 || !S_ISREG(file.st_mode) ||
      file.st_uid != process.st_uid) {
    return PerfMap("");
  }
  std::string text(static_cast<size_t>(std::min<off_t>(file.st_size, kMaxPerfMapBytes)), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return PerfMap(text);
}

std::string PerfMap::Name(uint64_t address) const {
  auto after = std::upper_bound(entries_.begin(), entries_.end(), address,
                                [](uint64_t a, const Entry& e) { return a < e.start; });
  if (after == entries_.begin()) return "";
  const Entry& entry = *std::prev(after);
  return address - entry.start < entry.size ? entry.name : "";
}

}  // namespace loupe::symbols
