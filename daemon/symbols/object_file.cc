#include "daemon/symbols/object_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>

#include <cerrno>
#include <memory>

#include "daemon/base/proc_root.h"
#include "daemon/base/status_util.h"

namespace loupe::symbols {
namespace {

struct ElfEnd {
  void operator()(Elf* elf) const { elf_end(elf); }
};

}  // namespace

std::string ReadBuildId(int fd) {
  elf_version(EV_CURRENT);
  std::unique_ptr<Elf, ElfEnd> elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  if (elf == nullptr || elf_kind(elf.get()) != ELF_K_ELF) return "";
  size_t count = 0;
  if (elf_getphdrnum(elf.get(), &count) != 0) return "";
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr segment;
    if (gelf_getphdr(elf.get(), static_cast<int>(i), &segment) == nullptr ||
        segment.p_type != PT_NOTE) {
      continue;
    }
    Elf_Data* data = elf_getdata_rawchunk(elf.get(), static_cast<int64_t>(segment.p_offset),
                                          segment.p_filesz, ELF_T_NHDR);
    if (data == nullptr) continue;
    size_t offset = 0, name_at = 0, desc_at = 0;
    GElf_Nhdr note;
    while ((offset = gelf_getnote(data, offset, &note, &name_at, &desc_at)) > 0) {
      const char* base = static_cast<const char*>(data->d_buf);
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          std::string_view(base + name_at, 3) == "GNU") {
        return std::string(base + desc_at, note.n_descsz);
      }
    }
  }
  return "";
}

std::string HexOf(const std::string& bytes) {
  std::string hex;
  for (unsigned char c : bytes) hex += fmt::format("{:02x}", c);
  return hex;
}

absl::StatusOr<ObjectFile> OpenObject(uint32_t pid, const Mapping& mapping) {
  ObjectFile object;
  object.path = mapping.path;
  const std::string root = ProcPath(pid, "/root");
  const std::string through_root = root + mapping.path;
  const std::string through_map =
      ProcPath(pid, fmt::format("/map_files/{:x}-{:x}", mapping.start, mapping.end));
  // map_files names the very inode mapped; the path may name another by now.
  object.fd.Reset(::open(through_map.c_str(), O_RDONLY | O_CLOEXEC));
  if (!object.fd.valid()) object.fd.Reset(::open(through_root.c_str(), O_RDONLY | O_CLOEXEC));
  if (!object.fd.valid()) return ErrnoStatus("open", through_root);
  object.debug_dir = through_root.substr(0, through_root.rfind('/'));
  object.build_id = ReadBuildId(object.fd.get());
  return object;
}

}  // namespace loupe::symbols
