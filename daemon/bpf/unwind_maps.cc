#include "daemon/bpf/unwind_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "daemon/base/proc_root.h"
#include "daemon/symbols/object_file.h"
#include "daemon/symbols/unwind_table.h"

namespace loupe::bpf {
namespace {

// Room for the tables of files that targets map after attach (dlopen, exec
// of another program, children), on top of twice what attach needed; more
// when children are followed, as they may exec programs of any size (cc1:
// 480 k rows). 16 bytes of kernel memory each.
constexpr uint32_t kSpareRows = 1 << 16;
constexpr uint32_t kSpareRowsForChildren = 1 << 20;
constexpr uint32_t kMaxRows = 1 << 23;  // bpf/include/unwind.bpf.h searches 23 steps
// A process that keeps asking (a stack through junk, code mapped and
// unmapped) is reloaded at most this often; its request waits meanwhile.
constexpr uint64_t kReloadIntervalNs = 100'000'000;
// How often every process's mappings are compared with those loaded: a
// library unmapped and another mapped at the same place asks for nothing.
constexpr uint64_t kSweepIntervalNs = 1'000'000'000;
constexpr uint64_t kHighestUserAddress = 0x00007fffffffffff;  // [vsyscall] is above

std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> ExecutableLoads(int fd) {
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> loads;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  size_t count = 0;
  if (elf != nullptr && elf_getphdrnum(elf, &count) == 0) {
    for (size_t i = 0; i < count; ++i) {
      GElf_Phdr segment;
      if (gelf_getphdr(elf, static_cast<int>(i), &segment) != nullptr &&
          segment.p_type == PT_LOAD && (segment.p_flags & PF_X) != 0) {
        loads.emplace_back(segment.p_offset, segment.p_vaddr, segment.p_filesz);
      }
    }
  }
  if (elf != nullptr) elf_end(elf);
  return loads;
}

// The compiler's kinds are the BPF walker's, number for number.
using symbols::UnwindKind;
static_assert(static_cast<int>(UnwindKind::kNone) == LOUPE_UNWIND_NONE);
static_assert(static_cast<int>(UnwindKind::kCfaRsp) == LOUPE_UNWIND_CFA_RSP);
static_assert(static_cast<int>(UnwindKind::kCfaRbp) == LOUPE_UNWIND_CFA_RBP);
static_assert(static_cast<int>(UnwindKind::kOutermost) == LOUPE_UNWIND_OUTERMOST);
static_assert(static_cast<int>(UnwindKind::kSignal) == LOUPE_UNWIND_SIGNAL);
static_assert(static_cast<int>(UnwindKind::kPlt) == LOUPE_UNWIND_PLT);
static_assert(static_cast<int>(UnwindKind::kCfaRegister) == LOUPE_UNWIND_CFA_REG);
static_assert(static_cast<int>(UnwindKind::kUnsupported) == LOUPE_UNWIND_UNSUPPORTED);
static_assert(static_cast<int>(UnwindKind::kCfaDerefRbp) == LOUPE_UNWIND_CFA_DEREF_RBP);

std::optional<loupe_unwind_row> ToRow(const symbols::UnwindRow& row) {
  if (row.address > UINT32_MAX || row.rbp_offset < INT16_MIN || row.rbp_offset > INT16_MAX) {
    return std::nullopt;
  }
  loupe_unwind_row out{};
  out.address = static_cast<uint32_t>(row.address);
  out.kind = static_cast<uint8_t>(row.kind);
  out.cfa_register = row.cfa_register | (row.rbp_from_rbp ? LOUPE_UNWIND_RBP_FROM_RBP : 0);
  out.rbp_offset = static_cast<int16_t>(row.rbp_offset);
  out.cfa_offset = row.cfa_offset;
  return out;
}

}  // namespace

std::vector<loupe_unwind_key> UnwindKeys(uint32_t tgid, uint64_t start, uint64_t end) {
  std::vector<loupe_unwind_key> keys;
  while (start < end) {
    uint64_t block = start == 0 ? uint64_t{1} << 63 : start & -start;
    while (block > end - start) block >>= 1;
    loupe_unwind_key key{};
    key.prefixlen = 32 + 64 - std::countr_zero(block);
    key.tgid = tgid;
    const uint64_t big_endian = __builtin_bswap64(start);
    std::memcpy(key.address, &big_endian, sizeof big_endian);
    keys.push_back(key);
    start += block;
  }
  return keys;
}

namespace {

}  // namespace

UnwindMaps::FileTable& UnwindMaps::TableFor(uint32_t pid, const symbols::Mapping& mapping) {
  const FileKey key{mapping.device, mapping.inode};
  auto known = files_.find(key);
  if (known != files_.end()) return known->second;
  FileTable& table = files_[key];
  // A table is read from the file as the caller could read it: a binary
  // the caller may only execute stays out (its stacks stop there).
  absl::StatusOr<symbols::ObjectFile> object = [&]() -> absl::StatusOr<symbols::ObjectFile> {
    ScopedFsCredentials as_caller;
    if (absl::Status taken = as_caller.Take(credentials_); !taken.ok()) return taken;
    return symbols::OpenObject(pid, mapping);
  }();
  if (!object.ok()) {
    notes_.push_back(fmt::format("{}: frame pointers only: {}", mapping.path,
                                 std::string(object.status().message())));
    return table;
  }
  absl::StatusOr<symbols::UnwindTable> compiled =
      symbols::CompileUnwindTable(object->fd.get());
  if (!compiled.ok()) {
    notes_.push_back(fmt::format("{}: frame pointers only: {}", mapping.path,
                                 std::string(compiled.status().message())));
    return table;
  }
  for (const auto& [offset, vaddr, size] : ExecutableLoads(object->fd.get())) {
    table.loads.push_back({offset, vaddr, size});
  }
  table.rows.reserve(compiled->rows.size());
  for (const symbols::UnwindRow& row : compiled->rows) {
    std::optional<loupe_unwind_row> converted = ToRow(row);
    if (!converted) {
      notes_.push_back(fmt::format("{}: frame pointers only: addresses past 4 GiB", mapping.path));
      table.rows.clear();
      break;
    }
    table.rows.push_back(*converted);
  }
  return table;
}

void UnwindMaps::Prepare(const std::vector<uint32_t>& tgids) {
  for (uint32_t tgid : tgids) {
    absl::StatusOr<std::vector<symbols::Mapping>> mappings = symbols::ReadProcMaps(tgid);
    if (!mappings.ok()) continue;
    for (const symbols::Mapping& mapping : *mappings) {
      if (mapping.HasObject()) TableFor(tgid, mapping);
    }
  }
}

uint32_t UnwindMaps::rows_to_reserve(bool follow_children) const {
  uint64_t rows = 0;
  for (const auto& [key, table] : files_) rows += table.rows.size();
  const uint64_t spare = follow_children ? kSpareRowsForChildren : kSpareRows;
  return static_cast<uint32_t>(std::min<uint64_t>(2 * rows + spare, kMaxRows));
}

bool UnwindMaps::Upload(FileTable& table) {
  if (table.uploaded) return table.row_count > 0;
  table.uploaded = true;
  const uint32_t count = static_cast<uint32_t>(table.rows.size());
  if (count == 0) {
    ++stats_.files_without;
    return false;
  }
  if (stats_.rows + count > stats_.capacity) {
    notes_.push_back(fmt::format(
        "unwind tables full ({} of {} rows): a file of {} rows is walked by frame pointers",
        stats_.rows, stats_.capacity, count));
    ++stats_.files_without;
    table.rows = {};
    return false;
  }
  const uint32_t first = static_cast<uint32_t>(stats_.rows);
  std::vector<uint32_t> keys(count);
  for (uint32_t i = 0; i < count; ++i) keys[i] = first + i;
  uint32_t done = count;
  if (bpf_map_update_batch(bpf_map__fd(maps_.rows), keys.data(), table.rows.data(), &done,
                           nullptr) != 0) {
    notes_.push_back(fmt::format("unwind tables: loading {} rows failed: {}", count,
                                 std::strerror(errno)));
    ++stats_.files_without;
    table.rows = {};
    return false;
  }
  table.first_row = first;
  table.row_count = count;
  table.rows = {};
  stats_.rows += count;
  ++stats_.files;
  return true;
}

void UnwindMaps::ForgetProcess(uint32_t tgid) {
  auto known = processes_.find(tgid);
  if (known == processes_.end()) return;
  for (const loupe_unwind_key& key : known->second.keys) {
    bpf_map__delete_elem(maps_.mappings, &key, sizeof key, 0);
  }
  bpf_map__delete_elem(maps_.processes, &tgid, sizeof tgid, 0);
  processes_.erase(known);
  --stats_.processes;
}

uint64_t UnwindMaps::ExecutableLayout(const std::vector<symbols::Mapping>& mappings) {
  uint64_t hash = 0;
  for (const symbols::Mapping& m : mappings) {
    if (m.executable) hash = absl::HashOf(hash, m.start, m.end, m.offset, m.device, m.inode);
  }
  return hash;
}

// Written over the old mappings, whose keys left over are removed after:
// the walks of the process's threads meanwhile find one or the other. (A
// reload that removed them all first, then read /proc/PID/maps, which waits
// for the process's mmap_lock, cut every stack walked in between.)
void UnwindMaps::LoadProcess(uint32_t tgid, uint64_t now_ns) {
  absl::StatusOr<std::vector<symbols::Mapping>> mappings = symbols::ReadProcMaps(tgid);
  if (!mappings.ok()) {  // gone
    ForgetProcess(tgid);
    return;
  }
  const auto [known, added] = processes_.try_emplace(tgid);
  Process& process = known->second;
  std::vector<loupe_unwind_key> old_keys = std::exchange(process.keys, {});
  process.loaded_ns = now_ns;
  process.layout = ExecutableLayout(*mappings);
  if (added) ++stats_.processes;
  ++stats_.loads;
  for (const symbols::Mapping& mapping : *mappings) {
    if (!mapping.executable || mapping.start >= kHighestUserAddress) continue;
    loupe_unwind_mapping value{};
    value.start = mapping.start;
    value.end = mapping.end;
    if (mapping.HasObject()) {
      FileTable& table = TableFor(tgid, mapping);
      const uint64_t length = mapping.end - mapping.start;
      for (const FileTable::Load& load : table.loads) {
        if (load.offset < mapping.offset + length && mapping.offset < load.offset + load.size) {
          value.bias = mapping.start - mapping.offset + load.offset - load.vaddr;
          if (Upload(table)) {
            value.first_row = table.first_row;
            value.row_count = table.row_count;
          }
          break;
        }
      }
    }
    for (const loupe_unwind_key& key : UnwindKeys(tgid, mapping.start, mapping.end)) {
      if (bpf_map__update_elem(maps_.mappings, &key, sizeof key, &value, sizeof value, BPF_ANY) ==
          0) {
        process.keys.push_back(key);
      }
    }
  }
  const auto bytes = [](const loupe_unwind_key& key) {
    return std::string_view(reinterpret_cast<const char*>(&key), sizeof key);
  };
  absl::flat_hash_set<std::string_view> kept;
  for (const loupe_unwind_key& key : process.keys) kept.insert(bytes(key));
  for (const loupe_unwind_key& key : old_keys) {
    if (!kept.contains(bytes(key))) bpf_map__delete_elem(maps_.mappings, &key, sizeof key, 0);
  }
  const uint8_t yes = 1;
  bpf_map__update_elem(maps_.processes, &tgid, sizeof tgid, &yes, sizeof yes, BPF_ANY);
}

absl::Status UnwindMaps::Start(const Maps& maps, const std::vector<uint32_t>& tgids) {
  maps_ = maps;
  stats_.capacity = bpf_map__max_entries(maps.rows);
  for (uint32_t tgid : tgids) LoadProcess(tgid, 0);
  return absl::OkStatus();
}

void UnwindMaps::Poll(uint64_t now_ns) {
  std::vector<uint32_t> asked;
  uint32_t key = 0;
  const int fd = bpf_map__fd(maps_.refresh);
  for (uint32_t* previous = nullptr; asked.size() < 256; previous = &asked.back()) {
    if (bpf_map_get_next_key(fd, previous, &key) != 0) break;
    asked.push_back(key);
  }
  for (uint32_t tgid : asked) {
    uint8_t loaded = 0;
    auto known = processes_.find(tgid);
    const bool current = bpf_map__lookup_elem(maps_.processes, &tgid, sizeof tgid, &loaded,
                                              sizeof loaded, 0) == 0;
    if (current && known != processes_.end() &&
        now_ns < known->second.loaded_ns + kReloadIntervalNs) {
      continue;  // asked again too soon: the request stays for a later poll
    }
    bpf_map_delete_elem(fd, &tgid);
    LoadProcess(tgid, now_ns);
  }
  if (now_ns >= last_sweep_ns_ + kSweepIntervalNs) {
    last_sweep_ns_ = now_ns;
    std::vector<uint32_t> gone, changed;
    for (const auto& [tgid, process] : processes_) {
      absl::StatusOr<std::vector<symbols::Mapping>> mappings = symbols::ReadProcMaps(tgid);
      if (!mappings.ok()) {
        gone.push_back(tgid);
      } else if (ExecutableLayout(*mappings) != process.layout) {
        changed.push_back(tgid);
      }
    }
    for (uint32_t tgid : gone) ForgetProcess(tgid);
    for (uint32_t tgid : changed) LoadProcess(tgid, now_ns);
  }
}

std::vector<std::string> UnwindMaps::TakeNotes() { return std::exchange(notes_, {}); }

std::optional<loupe_unwind_mapping> UnwindMaps::MappingAt(uint32_t tgid, uint64_t pc) const {
  if (maps_.mappings == nullptr) return std::nullopt;
  loupe_unwind_key key{.prefixlen = 32 + 64, .tgid = tgid, .address = {}};
  const uint64_t big_endian = __builtin_bswap64(pc);
  std::memcpy(key.address, &big_endian, sizeof big_endian);
  loupe_unwind_mapping mapping{};
  if (bpf_map__lookup_elem(maps_.mappings, &key, sizeof key, &mapping, sizeof mapping, 0) != 0) {
    return std::nullopt;
  }
  return mapping;
}

std::optional<loupe_unwind_row> UnwindMaps::RowAt(const loupe_unwind_mapping& mapping,
                                                  uint32_t address) const {
  if (maps_.rows == nullptr) return std::nullopt;
  // The first row past `address`, by binary search over the run, as BPF does.
  uint32_t low = mapping.first_row, high = mapping.first_row + mapping.row_count;
  loupe_unwind_row row{};
  while (low < high) {
    uint32_t middle = low + (high - low) / 2;
    if (bpf_map__lookup_elem(maps_.rows, &middle, sizeof middle, &row, sizeof row, 0) != 0) {
      return std::nullopt;
    }
    if (row.address <= address) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  if (low == mapping.first_row) return std::nullopt;
  uint32_t found = low - 1;
  if (bpf_map__lookup_elem(maps_.rows, &found, sizeof found, &row, sizeof row, 0) != 0) {
    return std::nullopt;
  }
  return row;
}

}  // namespace loupe::bpf
