// The unwind tables of a session's targets, in the BPF maps that
// bpf/include/unwind.bpf.h walks: each executable file's CFI compiled once
// (symbols::CompileUnwindTable) into a run of rows, and each process's
// executable mappings pointing at their file's run. Processes are loaded at
// attach and whenever BPF asks (a new child, an exec, code mapped since).
#ifndef LOUPE_DAEMON_BPF_UNWIND_MAPS_H_
#define LOUPE_DAEMON_BPF_UNWIND_MAPS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "daemon/base/credentials.h"
#include "daemon/symbols/process_maps.h"
#include "shared/records.h"

struct bpf_map;

namespace loupe::bpf {

// [start, end) of `tgid` as the fewest aligned power-of-two blocks, each
// one key of the LPM trie (at most two per address bit).
std::vector<loupe_unwind_key> UnwindKeys(uint32_t tgid, uint64_t start, uint64_t end);

class UnwindMaps {
 public:
  struct Maps {
    bpf_map* rows;
    bpf_map* mappings;
    bpf_map* processes;
    bpf_map* refresh;
  };
  struct Stats {
    uint64_t files = 0;           // with a table in the row map
    uint64_t files_without = 0;   // walked by frame pointers: no CFI, too big, no room left
    uint64_t rows = 0;            // used of capacity
    uint64_t capacity = 0;
    uint64_t processes = 0;       // loaded now
    uint64_t loads = 0;           // process loads, attach and refreshes
  };

  // Files are opened with these rights: the caller's (nullopt: louped's).
  void set_credentials(std::optional<Credentials> credentials) {
    credentials_ = std::move(credentials);
  }
  // Compiles the tables of `tgids`' files before the maps are created, so
  // the row map can be sized to them: rows_to_reserve() after this.
  void Prepare(const std::vector<uint32_t>& tgids);
  uint32_t rows_to_reserve(bool follow_children) const;

  // The maps are loaded (the row map with rows_to_reserve() entries): loads
  // the prepared processes. Errors only for a map that refuses updates.
  absl::Status Start(const Maps& maps, const std::vector<uint32_t>& tgids);
  // Serves BPF's requests for tables and forgets processes that are gone;
  // cheap when there is nothing to do (one map lookup).
  void Poll(uint64_t now_ns);

  // What BPF's walk finds: the mapping of `tgid` holding `pc`, and the
  // last row at or before `address` in a mapping's run (for a walk from
  // user space, user_stack_walk.h).
  std::optional<loupe_unwind_mapping> MappingAt(uint32_t tgid, uint64_t pc) const;
  std::optional<loupe_unwind_row> RowAt(const loupe_unwind_mapping& mapping,
                                        uint32_t address) const;

  const Stats& stats() const { return stats_; }
  // Notes for the session's warnings: files walked by frame pointers and why.
  std::vector<std::string> TakeNotes();

 private:
  struct FileTable {
    std::vector<loupe_unwind_row> rows;  // until uploaded
    struct Load {
      uint64_t offset, vaddr, size;
    };
    std::vector<Load> loads;  // executable PT_LOAD segments
    uint32_t first_row = 0;
    uint32_t row_count = 0;  // 0: frame pointers
    bool uploaded = false;
  };
  using FileKey = std::tuple<uint64_t, uint64_t>;  // device, inode

  FileTable& TableFor(uint32_t pid, const symbols::Mapping& mapping);
  bool Upload(FileTable& table);
  void LoadProcess(uint32_t tgid, uint64_t now_ns);
  void ForgetProcess(uint32_t tgid);

  Maps maps_{};
  std::optional<Credentials> credentials_;
  std::map<FileKey, FileTable> files_;
  struct Process {
    std::vector<loupe_unwind_key> keys;
    uint64_t loaded_ns = 0;
    uint64_t layout = 0;  // ExecutableLayout of the mappings loaded
  };
  static uint64_t ExecutableLayout(const std::vector<symbols::Mapping>& mappings);
  absl::flat_hash_map<uint32_t, Process> processes_;
  uint64_t last_sweep_ns_ = 0;
  Stats stats_;
  std::vector<std::string> notes_;
};

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_UNWIND_MAPS_H_
