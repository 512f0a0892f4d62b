#include "daemon/probes/elf_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "daemon/base/status_util.h"
#include "daemon/symbols/go_stack_ends.h"
#include "daemon/symbols/unwind_table.h"

namespace loupe::probes {
namespace {

Elf_Scn* FindSection(Elf* elf, std::string_view wanted, GElf_Shdr* header) {
  size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) != 0) return nullptr;
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    if (gelf_getshdr(section, header) == nullptr) continue;
    const char* name = elf_strptr(elf, names, header->sh_name);
    if (name != nullptr && wanted == name) return section;
  }
  return nullptr;
}

Elf_Scn* FindSectionOfType(Elf* elf, uint32_t type, GElf_Shdr* header) {
  for (Elf_Scn* section = elf_nextscn(elf, nullptr); section != nullptr;
       section = elf_nextscn(elf, section)) {
    if (gelf_getshdr(section, header) != nullptr && header->sh_type == type) return section;
  }
  return nullptr;
}

struct NamedSymbol {
  GElf_Sym symbol;
  std::string_view name;  // "" when unreadable; the file's string table holds it
};

// Calls `visit` with each symbol defined in the file, of .symtab then
// .dynsym ("" for a name that cannot be read), until it returns true.
void VisitSymbols(Elf* elf, const std::function<bool(const GElf_Sym&, std::string_view)>& visit) {
  for (uint32_t type : {SHT_SYMTAB, SHT_DYNSYM}) {
    GElf_Shdr header;
    Elf_Scn* section = FindSectionOfType(elf, type, &header);
    if (section == nullptr || header.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(section, nullptr);
    if (data == nullptr) continue;
    const size_t count = header.sh_size / header.sh_entsize;
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym symbol;
      if (gelf_getsym(data, static_cast<int>(i), &symbol) == nullptr) break;
      if (symbol.st_shndx == SHN_UNDEF) continue;
      const char* name = elf_strptr(elf, header.sh_link, symbol.st_name);
      if (visit(symbol, name != nullptr ? name : "")) return;
    }
  }
}

// The first symbol defined in the file that `matches`.
std::optional<NamedSymbol> FirstSymbol(
    Elf* elf, const std::function<bool(const GElf_Sym&, std::string_view)>& matches) {
  std::optional<NamedSymbol> found;
  VisitSymbols(elf, [&](const GElf_Sym& symbol, std::string_view name) {
    if (matches(symbol, name)) found = NamedSymbol{symbol, name};
    return found.has_value();
  });
  return found;
}

ElfSymbol SymbolOf(const GElf_Sym& symbol) {
  return ElfSymbol{.address = symbol.st_value,
                   .size = symbol.st_size,
                   .global = GELF_ST_BIND(symbol.st_info) != STB_LOCAL};
}

// A part split off a function has no entry a call could be timed from.
absl::Status SplitOff(uint64_t file_offset) {
  return absl::InvalidArgumentError(fmt::format(
      "file offset {:#x} is in code split off a function (a .cold part, entered by a jump "
      "inside its parent's frame, not by a call): probe a frame of the function's main part",
      file_offset));
}

}  // namespace

void ElfFile::ElfEnd::operator()(Elf* elf) const { elf_end(elf); }

ElfFile::ElfFile(std::string path, ScopedFd fd, Elf* elf)
    : path_(std::move(path)), fd_(std::move(fd)), elf_(elf) {}

absl::StatusOr<std::unique_ptr<ElfFile>> ElfFile::Open(const std::string& path) {
  elf_version(EV_CURRENT);
  // O_NONBLOCK: a FIFO (or a device) named by a request must not hold the
  // session's start until someone writes to it; only a regular file is read.
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: not a regular file, so not an executable or library to probe", path));
  }
  Elf* elf = elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr);
  if (elf == nullptr) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", path, elf_errmsg(-1)));
  }
  std::unique_ptr<ElfFile> file(new ElfFile(path, std::move(fd), elf));
  GElf_Ehdr header;
  if (elf_kind(elf) != ELF_K_ELF || gelf_getehdr(elf, &header) == nullptr ||
      gelf_getclass(elf) != ELFCLASS64 || header.e_machine != EM_X86_64) {
    return absl::InvalidArgumentError(fmt::format("{}: not a 64-bit x86-64 ELF file", path));
  }
  return file;
}

absl::StatusOr<std::vector<UsdtNote>> ElfFile::UsdtNotes() const {
  GElf_Shdr header;
  Elf_Scn* section = FindSection(elf_.get(), ".note.stapsdt", &header);
  if (section == nullptr) return std::vector<UsdtNote>{};
  Elf_Data* data = elf_rawdata(section, nullptr);
  if (data == nullptr || data->d_buf == nullptr) {
    return absl::InvalidArgumentError(fmt::format("{}: unreadable .note.stapsdt", path_));
  }
  absl::StatusOr<std::vector<UsdtNote>> notes = ParseUsdtNotes(
      std::span<const uint8_t>(static_cast<const uint8_t*>(data->d_buf), data->d_size));
  if (!notes.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", path_, MessageOf(notes.status())));
  }
  GElf_Shdr base;
  if (FindSection(elf_.get(), ".stapsdt.base", &base) != nullptr) {
    for (UsdtNote& note : *notes) {
      const uint64_t moved = base.sh_addr - note.base;
      note.pc += moved;
      if (note.semaphore != 0) note.semaphore += moved;
    }
  }
  return notes;
}

bool ElfFile::IsGo() const { return symbols::IsGoProgram(elf_.get()); }

bool ElfFile::HasExceptionTables() const {
  GElf_Shdr header;
  return FindSection(elf_.get(), ".gcc_except_table", &header) != nullptr;
}

bool ElfFile::HasSymbolTable() const {
  GElf_Shdr header;
  return FindSectionOfType(elf_.get(), SHT_SYMTAB, &header) != nullptr;
}

std::optional<ElfSymbol> ElfFile::FindSymbol(const std::string& name) const {
  const std::optional<NamedSymbol> found =
      FirstSymbol(elf_.get(), [&](const GElf_Sym& symbol, std::string_view symbol_name) {
        return symbol.st_value != 0 && symbol_name == name;
      });
  if (!found) return std::nullopt;
  return SymbolOf(found->symbol);
}

std::vector<ElfSymbol> ElfFile::SymbolsWhere(
    const std::function<bool(std::string_view)>& matches) const {
  std::vector<ElfSymbol> all;
  VisitSymbols(elf_.get(), [&](const GElf_Sym& symbol, std::string_view name) {
    if (symbol.st_value != 0 && !name.empty() && matches(name)) all.push_back(SymbolOf(symbol));
    return false;
  });
  return all;
}

absl::StatusOr<uint64_t> ElfFile::FileOffset(uint64_t address) const {
  size_t count = 0;
  if (elf_getphdrnum(elf_.get(), &count) != 0) {
    return absl::InvalidArgumentError(fmt::format("{}: no program headers", path_));
  }
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr segment;
    if (gelf_getphdr(elf_.get(), static_cast<int>(i), &segment) == nullptr) continue;
    if (segment.p_type == PT_LOAD && address >= segment.p_vaddr &&
        address < segment.p_vaddr + segment.p_memsz) {
      return address - segment.p_vaddr + segment.p_offset;
    }
  }
  return absl::InvalidArgumentError(
      fmt::format("{}: address {:#x} is in no loaded segment", path_, address));
}

absl::StatusOr<ElfFunction> ElfFile::FunctionAt(uint64_t file_offset) const {
  std::optional<uint64_t> address;
  size_t count = 0;
  if (elf_getphdrnum(elf_.get(), &count) != 0) {
    return absl::InvalidArgumentError(fmt::format("{}: no program headers", path_));
  }
  for (size_t i = 0; i < count && !address; ++i) {
    GElf_Phdr segment;
    if (gelf_getphdr(elf_.get(), static_cast<int>(i), &segment) == nullptr) continue;
    if (segment.p_type == PT_LOAD && (segment.p_flags & PF_X) != 0 &&
        file_offset >= segment.p_offset && file_offset < segment.p_offset + segment.p_filesz) {
      address = file_offset - segment.p_offset + segment.p_vaddr;
    }
  }
  if (!address) {
    return absl::InvalidArgumentError(
        fmt::format("file offset {:#x} is in none of {}'s code", file_offset, path_));
  }
  const std::optional<NamedSymbol> found =
      FirstSymbol(elf_.get(), [&](const GElf_Sym& symbol, std::string_view) {
        return GELF_ST_TYPE(symbol.st_info) == STT_FUNC && *address >= symbol.st_value &&
               *address < symbol.st_value + symbol.st_size;
      });
  if (found) {
    if (found->name.ends_with(".cold")) return SplitOff(file_offset);
    return ElfFunction{std::string(found->name), SymbolOf(found->symbol)};
  }
  // Each function's FDE covers exactly its code (a .cold part has its own).
  absl::StatusOr<symbols::CodeExtent> extent = symbols::FdeExtentAt(fd_.get(), *address);
  if (!extent.ok()) {
    return absl::NotFoundError(fmt::format(
        "no function symbol in {} holds file offset {:#x}, and its unwind information does not "
        "tell the function either ({})",
        path_, file_offset, MessageOf(extent.status())));
  }
  if (!extent->entry) return SplitOff(file_offset);
  return ElfFunction{"", {extent->start, extent->end - extent->start, false}};
}

std::vector<uint8_t> ElfFile::BytesAt(uint64_t address, size_t n) const {
  absl::StatusOr<uint64_t> offset = FileOffset(address);
  if (!offset.ok()) return {};
  std::vector<uint8_t> bytes(n);
  const ssize_t got = pread(fd_.get(), bytes.data(), n, static_cast<off_t>(*offset));
  bytes.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return bytes;
}

}  // namespace loupe::probes
