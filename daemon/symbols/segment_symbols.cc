#include "daemon/symbols/segment_symbols.h"

#include <fmt/format.h>

#include "daemon/symbols/perf_map.h"

namespace loupe::symbols {
namespace {

void AddFrames(const std::vector<SourceFrame>& frames, v1::SymbolTable::Address* out) {
  for (const SourceFrame& frame : frames) {
    v1::SymbolTable::Frame* added = out->add_frames();
    added->set_function(frame.function);
    added->set_file(frame.file);
    added->set_line(frame.line);
    added->set_inlined(frame.inlined);
  }
}

}  // namespace

void SegmentSymbols::AddUser(uint32_t pid, uint64_t address, Location location) {
  user_.emplace(std::pair(pid, address), std::move(location));
}

void SegmentSymbols::Clear() {
  user_.clear();
  kernel_.clear();
}

v1::SymbolTable SegmentSymbols::Build(Symbolizer& symbolizer) const {
  v1::SymbolTable table;
  std::map<std::pair<uint32_t, const Mapping*>, uint32_t> mapping_index;
  std::map<uint32_t, PerfMap> perf_maps;  // JIT code, read once per process per seal
  uint64_t pending = 0, unknown = 0;
  for (const auto& [key, location] : user_) {
    const auto [pid, address] = key;
    v1::SymbolTable::Address* entry = table.add_addresses();
    entry->set_pid(pid);
    entry->set_address(address);
    if (location.object == nullptr) {
      auto jit = perf_maps.find(pid);
      if (jit == perf_maps.end()) jit = perf_maps.emplace(pid, PerfMap::Load(pid)).first;
      if (std::string name = jit->second.Name(address); !name.empty()) {
        entry->add_frames()->set_function(name);
        continue;
      }
    }
    if (location.mapping == nullptr) {
      ++unknown;
      continue;
    }
    auto [it, added] = mapping_index.emplace(std::pair(pid, location.mapping),
                                             static_cast<uint32_t>(table.mappings_size()));
    if (added) {
      v1::SymbolTable::Mapping* mapping = table.add_mappings();
      mapping->set_pid(pid);
      mapping->set_start(location.mapping->start);
      mapping->set_end(location.mapping->end);
      mapping->set_file_offset(location.mapping->offset);
      mapping->set_path(location.mapping->path);
      if (location.object != nullptr) mapping->set_build_id(location.object->build_id);
    }
    entry->set_mapping(it->second + 1);
    if (location.object == nullptr) continue;
    std::optional<std::vector<SourceFrame>> frames =
        symbolizer.Lookup(*location.object, location.file_offset);
    if (frames) {
      AddFrames(*frames, entry);
    } else {
      ++pending;
    }
  }
  for (uint64_t address : kernel_) {
    v1::SymbolTable::Address* entry = table.add_addresses();
    entry->set_address(address);
    const std::string name = symbolizer.KernelName(address);
    if (!name.empty()) entry->add_frames()->set_function(name);
  }
  for (const std::string& note : symbolizer.Notes()) table.add_notes(note);
  if (pending != 0) {
    table.add_notes(fmt::format(
        "{} user addresses were still being symbolized at seal: they keep mapping and build id",
        pending));
  }
  if (unknown != 0) {
    table.add_notes(fmt::format("{} user addresses were in no known mapping", unknown));
  }
  return table;
}

}  // namespace loupe::symbols
