#include "daemon/session/name_cache.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/base/proc_root.h"
#include "daemon/base/scoped_fd.h"

namespace loupe::session {

std::optional<std::string> NameCache::ReadString(uint32_t tgid, uint64_t address, size_t max,
                                                 bool* gone) {
  if (address == 0) return std::nullopt;
  // process_vm_readv takes the pid as our namespace numbers it; when
  // louped knows targets only by global pid, read their memory file.
  ScopedFd memory;
  if (!PidsAreLocal()) {
    memory.Reset(::open(ProcPath(tgid, "/mem").c_str(), O_RDONLY | O_CLOEXEC));
    if (!memory.valid()) {
      if (gone != nullptr) *gone = errno == ENOENT;
      return std::nullopt;
    }
  }
  std::string text(max, '\0');
  // Page by page: a short string near the end of a mapping must not fail
  // because the bytes after it are unmapped.
  size_t got = 0;
  while (got < max) {
    const uint64_t at = address + got;
    const size_t to_page_end = 4096 - (at & 4095);
    const size_t want = std::min(max - got, to_page_end);
    iovec local{text.data() + got, want};
    iovec remote{reinterpret_cast<void*>(at), want};
    const ssize_t n =
        memory.valid()
            ? ::pread(memory.get(), local.iov_base, want, static_cast<off_t>(at))
            : process_vm_readv(static_cast<pid_t>(tgid), &local, 1, &remote, 1, 0);
    if (n <= 0) {
      if (gone != nullptr) *gone = n < 0 && errno == ESRCH;
      break;
    }
    if (std::memchr(text.data() + got, '\0', static_cast<size_t>(n)) != nullptr) {
      got += static_cast<size_t>(n);
      text.resize(std::strlen(text.c_str()));
      return text;
    }
    got += static_cast<size_t>(n);
  }
  if (got == 0) return std::nullopt;
  text.resize(got);
  return text;
}

std::optional<std::string_view> NameCache::Name(uint32_t tgid, uint64_t address) {
  for (uint32_t owner = tgid, hops = 0; hops < 64; ++hops) {
    if (auto it = names_.find(Key{owner, address}); it != names_.end()) return it->second;
    if (!gone_.contains(owner)) {
      bool gone = false;
      if (std::optional<std::string> read = ReadString(owner, address, kMaxName, &gone)) {
        if (names_.size() < kMaxEntries) {
          return names_.emplace(Key{owner, address}, *std::move(read)).first->second;
        }
        uncached_ = *std::move(read);
        return uncached_;
      }
      if (gone && gone_.size() < kMaxEntries) gone_.insert(owner);
    }
    auto parent = parent_.find(owner);  // gone: perhaps its parent has it
    if (parent == parent_.end()) break;
    owner = parent->second;
  }
  return std::nullopt;
}

void NameCache::OnFork(uint32_t parent_tgid, uint32_t child_tgid) {
  if (parent_tgid != child_tgid) parent_[child_tgid] = parent_tgid;
  gone_.erase(child_tgid);  // a pid used again
}

void NameCache::OnExec(uint32_t tgid) {
  parent_.erase(tgid);
  gone_.erase(tgid);
  absl::erase_if(names_, [tgid](const auto& entry) { return entry.first.tgid == tgid; });
}

}  // namespace loupe::session
