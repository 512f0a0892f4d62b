// Names the shim passes by address (string literals in the application),
// read from the process once and kept. A child forked after the name was
// read shares its parent's memory layout, so it inherits the parent's names;
// an exec forgets them. A process found gone is not read again (its events
// can outlive it in the ring) until its pid is seen forked or exec'ed anew.
#ifndef LOUPE_DAEMON_SESSION_NAME_CACHE_H_
#define LOUPE_DAEMON_SESSION_NAME_CACHE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace loupe::session {

class NameCache {
 public:
  static constexpr size_t kMaxName = 256;
  static constexpr size_t kMaxEntries = 1 << 16;

  // The NUL-terminated string at `address` in process `tgid` (cut at
  // kMaxName), or nullopt when it cannot be read. A view, not a copy (it is
  // looked up for every span and instant): good until the next call.
  std::optional<std::string_view> Name(uint32_t tgid, uint64_t address);
  void OnFork(uint32_t parent_tgid, uint32_t child_tgid);
  void OnExec(uint32_t tgid);

  // Reads without caching (a thread name may live in a buffer). When it
  // fails because the process no longer exists, `*gone` is set.
  static std::optional<std::string> ReadString(uint32_t tgid, uint64_t address, size_t max,
                                               bool* gone = nullptr);

 private:
  struct Key {
    uint32_t tgid;
    uint64_t address;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.tgid, k.address);
    }
  };
  absl::flat_hash_map<Key, std::string> names_;
  absl::flat_hash_map<uint32_t, uint32_t> parent_;  // forked child -> parent
  absl::flat_hash_set<uint32_t> gone_;
  std::string uncached_;  // a name read while the cache was full
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_NAME_CACHE_H_
