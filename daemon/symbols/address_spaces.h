// Where each user-space address of a target lives: per process, snapshots of
// its mappings (taken at attach, on exec, and when an address falls outside
// the last one), each executable file opened while the process still has it
// mapped. An address becomes a location — an object file and an offset in
// it — that stays valid after the process unmaps it, replaces the file or
// exits. Used on the session thread; objects are shared with the symbolizer.
#ifndef LOUPE_DAEMON_SYMBOLS_ADDRESS_SPACES_H_
#define LOUPE_DAEMON_SYMBOLS_ADDRESS_SPACES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/symbols/object_file.h"
#include "daemon/symbols/process_maps.h"

namespace loupe::symbols {

struct Location {
  std::shared_ptr<const ObjectFile> object;  // null: no file (anonymous, JIT, unknown)
  const Mapping* mapping = nullptr;          // in the snapshot that placed it
  uint64_t file_offset = 0;
};

class AddressSpaces {
 public:
  static constexpr uint64_t kMinRefreshIntervalNs = 100'000'000;

  // Takes a snapshot of `pid` now (attach, exec). After an exec, a process
  // already gone has no mappings known: the old ones would name its new
  // code wrongly.
  void Snapshot(uint32_t pid, uint64_t now_ns, bool exec = false);
  // A followed child: its own mappings if it still runs, else its
  // parent's, which a fork gives it whole (a child that lives a few ms is
  // gone before the fork leaves the reorder window).
  void Forked(uint32_t parent, uint32_t child, uint64_t now_ns);
  // Locates `address` in `pid`: the latest snapshot, refreshed (at most every
  // kMinRefreshIntervalNs per process) when the address is outside it.
  Location Locate(uint32_t pid, uint64_t address, uint64_t now_ns);
  size_t objects() const { return objects_.size(); }

 private:
  struct Space {
    std::vector<std::unique_ptr<std::vector<Mapping>>> snapshots;  // newest last, kept: locations point in
    std::vector<std::shared_ptr<const ObjectFile>> objects;  // per mapping of the newest snapshot
    uint64_t taken_ns = 0;
  };
  // False when the process is gone (its last snapshot stays).
  bool Take(uint32_t pid, Space& space, uint64_t now_ns);

  absl::flat_hash_map<uint32_t, Space> spaces_;
  // Open files by identity (device, inode): shared by every process mapping them.
  std::map<std::tuple<uint64_t, uint64_t, std::string>, std::shared_ptr<const ObjectFile>> objects_;
};

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_ADDRESS_SPACES_H_
