#include "daemon/symbols/elf_symbolizer.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "daemon/symbols/demangle.h"

namespace loupe::symbols {
namespace {

// No debuginfo_path: libdw's default, next to the file, .debug/ beside it,
// and /usr/lib/debug (its .build-id/ tree first). debuginfod is asked only
// when DEBUGINFOD_URLS is set in louped's environment.
const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

const char* LinkageOrName(Dwarf_Die* die) {
  Dwarf_Attribute attribute;
  for (int name : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name, DW_AT_name}) {
    if (dwarf_attr_integrate(die, name, &attribute) != nullptr) {
      if (const char* text = dwarf_formstring(&attribute)) return text;
    }
  }
  return nullptr;
}

// Where an inlined call was made: its DW_AT_call_file and DW_AT_call_line.
void CallSite(Dwarf_Die* inlined, Dwarf_Die* cu, std::string* file, uint32_t* line) {
  Dwarf_Attribute attribute;
  Dwarf_Word value = 0;
  file->clear();
  *line = 0;
  if (dwarf_attr(inlined, DW_AT_call_line, &attribute) != nullptr &&
      dwarf_formudata(&attribute, &value) == 0) {
    *line = static_cast<uint32_t>(value);
  }
  Dwarf_Files* files = nullptr;
  size_t count = 0;
  if (dwarf_attr(inlined, DW_AT_call_file, &attribute) != nullptr &&
      dwarf_formudata(&attribute, &value) == 0 && dwarf_getsrcfiles(cu, &files, &count) == 0 &&
      value < count) {
    if (const char* name = dwarf_filesrc(files, value, nullptr, nullptr)) *file = name;
  }
}

}  // namespace

ElfSymbolizer::ElfSymbolizer(const ObjectFile& object) {
  dwfl_ = dwfl_begin(&kCallbacks);
  const int fd = dup(object.fd.get());
  if (dwfl_ == nullptr || fd < 0) {
    if (fd >= 0) close(fd);
    note_ = "libdw could not start";
    return;
  }
  // Named through the target's root, so a .gnu_debuglink file beside it is
  // found there; read through our descriptor (libdw takes it).
  const std::string name = object.debug_dir + "/" + object.path.substr(object.path.rfind('/') + 1);
  dwfl_report_begin(dwfl_);
  module_ = dwfl_report_elf(dwfl_, object.path.c_str(), name.c_str(), fd, 0, false);
  dwfl_report_end(dwfl_, nullptr, nullptr);
  if (module_ == nullptr) {
    note_ = fmt::format("{}: not readable as ELF: {}", object.path, dwfl_errmsg(-1));
    return;
  }
  GElf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(module_, &bias);
  size_t count = 0;
  if (elf == nullptr || elf_getphdrnum(elf, &count) != 0) {
    note_ = fmt::format("{}: no program headers", object.path);
    module_ = nullptr;
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr segment;
    if (gelf_getphdr(elf, static_cast<int>(i), &segment) != nullptr && segment.p_type == PT_LOAD) {
      loads_.push_back({segment.p_offset, segment.p_vaddr + bias, segment.p_filesz});
    }
  }
  Dwarf_Addr dwarf_bias = 0;
  has_dwarf_ = dwfl_module_getdwarf(module_, &dwarf_bias) != nullptr;
  if (!has_dwarf_) note_ = fmt::format("{}: no debug information: symbol table only", object.path);
}

ElfSymbolizer::~ElfSymbolizer() {
  if (dwfl_ != nullptr) dwfl_end(dwfl_);
}

bool ElfSymbolizer::ToAddress(uint64_t file_offset, uint64_t* address) const {
  for (const Load& load : loads_) {
    if (file_offset >= load.offset && file_offset < load.offset + load.size) {
      *address = file_offset - load.offset + load.vaddr;
      return true;
    }
  }
  return false;
}

std::vector<SourceFrame> ElfSymbolizer::Symbolize(uint64_t file_offset) {
  std::vector<SourceFrame> frames;
  uint64_t address = 0;
  if (module_ == nullptr || !ToAddress(file_offset, &address)) return frames;

  // libdw finds the unit through .debug_aranges, which clang does not emit
  // by default: without it, look through every unit's ranges.
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = dwfl_module_addrdie(module_, address, &bias);
  for (Dwarf_Die* unit = nullptr; cu == nullptr && has_dwarf_;) {
    unit = dwfl_module_nextcu(module_, unit, &bias);
    if (unit == nullptr) break;
    if (dwarf_haspc(unit, address - bias) > 0) cu = unit;
  }
  std::string file;
  uint32_t line = 0;
  if (cu != nullptr) {
    if (Dwarf_Line* source = dwarf_getsrc_die(cu, address - bias)) {
      int number = 0;
      dwarf_lineno(source, &number);
      if (const char* name = dwarf_linesrc(source, nullptr, nullptr)) file = name;
      line = static_cast<uint32_t>(number);
    }
    // The innermost scope at the address; then its nesting in the concrete
    // tree (dwarf_getscopes continues an inline instance with the scopes of
    // its abstract definition, not with the function it was inlined into).
    Dwarf_Die* found = nullptr;
    Dwarf_Die* scopes = nullptr;
    int count = dwarf_getscopes(cu, address - bias, &found);
    if (count > 0) count = dwarf_getscopes_die(&found[0], &scopes);
    std::free(found);
    for (int i = 0; i < count; ++i) {  // innermost first
      const int tag = dwarf_tag(&scopes[i]);
      if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine) continue;
      frames.push_back({Demangle(LinkageOrName(&scopes[i])), file, line,
                        tag == DW_TAG_inlined_subroutine});
      if (tag == DW_TAG_subprogram) break;
      CallSite(&scopes[i], cu, &file, &line);  // the caller's line, for the next frame
    }
    std::free(scopes);
  }
  if (frames.empty()) {
    GElf_Off offset = 0;
    GElf_Sym symbol;
    const char* name =
        dwfl_module_addrinfo(module_, address, &offset, &symbol, nullptr, nullptr, nullptr);
    if (name != nullptr) frames.push_back({Demangle(name), file, line, false});
  }
  return frames;
}

}  // namespace loupe::symbols
