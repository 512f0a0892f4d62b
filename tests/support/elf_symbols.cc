#include "tests/support/elf_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

namespace loupe::testing {

std::map<std::string, AddressRange> FunctionRanges(const std::string& path) {
  std::map<std::string, AddressRange> ranges;
  elf_version(EV_CURRENT);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ranges;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  for (Elf_Scn* section = nullptr; elf && (section = elf_nextscn(elf, section));) {
    GElf_Shdr header;
    if (!gelf_getshdr(section, &header) || header.sh_type != SHT_SYMTAB) continue;
    Elf_Data* data = elf_getdata(section, nullptr);
    const size_t count = header.sh_entsize ? header.sh_size / header.sh_entsize : 0;
    for (size_t i = 0; data && i < count; ++i) {
      GElf_Sym symbol;
      if (!gelf_getsym(data, static_cast<int>(i), &symbol) ||
          GELF_ST_TYPE(symbol.st_info) != STT_FUNC || symbol.st_value == 0) {
        continue;
      }
      const char* name = elf_strptr(elf, header.sh_link, symbol.st_name);
      if (name) ranges[name] = {symbol.st_value, symbol.st_value + symbol.st_size};
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return ranges;
}

}  // namespace loupe::testing
