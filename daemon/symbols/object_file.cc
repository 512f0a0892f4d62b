#include "daemon/symbols/object_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

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

// The vDSO is the kernel's, the same image in every 64-bit process: ours,
// copied into a memory file, stands for the target's.
absl::StatusOr<ObjectFile> OpenOwnVdso() {
  const uint64_t base = getauxval(AT_SYSINFO_EHDR);
  absl::StatusOr<std::vector<Mapping>> mine = ReadProcMaps(static_cast<uint32_t>(getpid()));
  const Mapping* vdso = mine.ok() ? FindMapping(*mine, base) : nullptr;
  if (base == 0 || vdso == nullptr || !vdso->IsVdso()) {
    return absl::NotFoundError("this process has no vDSO to stand for the target's");
  }
  ObjectFile object;
  object.path = vdso->path;
  object.fd.Reset(memfd_create("vdso", MFD_CLOEXEC));
  const size_t size = vdso->end - vdso->start;
  if (!object.fd.valid() || write(object.fd.get(), reinterpret_cast<const void*>(base), size) !=
                                static_cast<ssize_t>(size)) {
    return ErrnoStatus("copy", "the vDSO");
  }
  object.build_id = ReadBuildId(object.fd.get());
  return object;
}

absl::StatusOr<ObjectFile> OpenObject(uint32_t pid, const Mapping& mapping) {
  if (mapping.IsVdso()) return OpenOwnVdso();
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
