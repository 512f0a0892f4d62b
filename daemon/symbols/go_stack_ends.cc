#include "daemon/symbols/go_stack_ends.h"

#include <gelf.h>

#include <algorithm>
#include <map>
#include <string>
#include <string_view>

namespace loupe::symbols {
namespace {

// Where stacks begin (a new thread's, the program's, a goroutine's), and
// where the runtime switches stacks: to g0 to park a goroutine, to grow
// its stack or run runtime code, to C for cgo, back to a goroutine for a
// callback from C, to g0 (realigned) for the vDSO's clock reads.
constexpr std::string_view kStackEnds[] = {
    "runtime.rt0_go",      "runtime.mstart",     "runtime.goexit",      "runtime.mcall",
    "runtime.morestack",   "runtime.systemstack", "runtime.asmcgocall", "runtime.cgocallback",
    "runtime.nanotime1",   "runtime.walltime",    "runtime.walltime1"};

struct Extent {
  uint64_t start = 0, end = 0;
  bool abi0 = false;
};

}  // namespace

bool IsGoProgram(Elf* elf) {
  size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) != 0) return false;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr) continue;
    const char* name = elf_strptr(elf, names, header.sh_name);
    if (name == nullptr) continue;
    for (std::string_view go : {".go.buildinfo", ".gopclntab", ".note.go.buildid"}) {
      if (go == name) return true;
    }
  }
  return false;
}

std::vector<UnwindRow> GoStackEnds(Elf* elf) {
  if (!IsGoProgram(elf)) return {};
  // The assembly function itself (name.abi0) over the wrapper Go's linker
  // adds for calls from Go code, where both are there.
  std::map<std::string_view, Extent> found;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr || header.sh_type != SHT_SYMTAB) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || header.sh_entsize == 0) continue;
    for (size_t i = 0; i < header.sh_size / header.sh_entsize; ++i) {
      GElf_Sym symbol;
      if (gelf_getsym(data, static_cast<int>(i), &symbol) == nullptr ||
          GELF_ST_TYPE(symbol.st_info) != STT_FUNC || symbol.st_size == 0) {
        continue;
      }
      const char* raw = elf_strptr(elf, header.sh_link, symbol.st_name);
      if (raw == nullptr) continue;
      std::string_view name = raw;
      const bool abi0 = name.ends_with(".abi0");
      if (abi0) name.remove_suffix(5);
      const auto end = std::ranges::find(kStackEnds, name);
      if (end == std::end(kStackEnds)) continue;
      Extent& extent = found[*end];
      if (extent.end == 0 || (abi0 && !extent.abi0)) {
        extent = {symbol.st_value, symbol.st_value + symbol.st_size, abi0};
      }
    }
  }
  std::vector<Extent> extents;
  for (const auto& [name, extent] : found) extents.push_back(extent);
  std::ranges::sort(extents, {}, &Extent::start);
  std::vector<UnwindRow> rows;
  for (const Extent& extent : extents) {
    if (!rows.empty() && rows.back().address > extent.start) continue;  // overlapping: odd, skipped
    if (!rows.empty() && rows.back().address == extent.start) rows.pop_back();
    rows.push_back({.address = extent.start, .kind = UnwindKind::kOutermost});
    rows.push_back({.address = extent.end, .kind = UnwindKind::kNone});
  }
  return rows;
}

}  // namespace loupe::symbols
