#include "daemon/symbols/kernel_btf_scan.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/btf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"

namespace loupe::symbols {
namespace {

// Sequential reads through a fixed buffer from a starting offset.
class BtfReader {
 public:
  BtfReader(int fd, uint64_t offset, uint64_t length) : fd_(fd), next_(offset), left_(length) {}

  uint64_t left() const { return left_ + (held_ - used_); }

  absl::Status Read(void* out, size_t size) {
    auto* bytes = static_cast<char*>(out);
    while (size > 0) {
      if (used_ == held_) {
        if (absl::Status filled = Fill(); !filled.ok()) return filled;
      }
      const size_t take = std::min(size, held_ - used_);
      std::memcpy(bytes, buffer_.data() + used_, take);
      used_ += take;
      bytes += take;
      size -= take;
    }
    return absl::OkStatus();
  }

  absl::Status Skip(uint64_t size) {
    const uint64_t buffered = std::min<uint64_t>(size, held_ - used_);
    used_ += buffered;
    size -= buffered;
    if (size > left_) return absl::DataLossError("BTF type section cut short");
    next_ += size;
    left_ -= size;
    return absl::OkStatus();
  }

 private:
  absl::Status Fill() {
    if (left_ == 0) return absl::DataLossError("BTF type section cut short");
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left_, buffer_.size()));
    const ssize_t got = ::pread(fd_, buffer_.data(), want, static_cast<off_t>(next_));
    if (got < 0) return ErrnoStatus("read", "BTF");
    if (got == 0) return absl::DataLossError("BTF file shorter than its header says");
    held_ = static_cast<size_t>(got);
    used_ = 0;
    next_ += held_;
    left_ -= held_;
    return absl::OkStatus();
  }

  int fd_;
  uint64_t next_;
  uint64_t left_;
  std::array<char, 64 << 10> buffer_{};
  size_t held_ = 0;
  size_t used_ = 0;
};

// Bytes that follow a type's common part, by kind (include/uapi/linux/btf.h).
absl::StatusOr<uint64_t> TrailingBytes(const btf_type& type) {
  const uint64_t vlen = BTF_INFO_VLEN(type.info);
  switch (BTF_INFO_KIND(type.info)) {
    case BTF_KIND_INT:
    case BTF_KIND_VAR:
    case BTF_KIND_DECL_TAG:
      return 4;
    case BTF_KIND_ARRAY:
      return sizeof(btf_array);
    case BTF_KIND_STRUCT:
    case BTF_KIND_UNION:
      return vlen * sizeof(btf_member);
    case BTF_KIND_ENUM:
      return vlen * sizeof(btf_enum);
    case BTF_KIND_FUNC_PROTO:
      return vlen * sizeof(btf_param);
    case BTF_KIND_DATASEC:
      return vlen * sizeof(btf_var_secinfo);
    case BTF_KIND_ENUM64:
      return vlen * sizeof(btf_enum64);
    case BTF_KIND_PTR:
    case BTF_KIND_FWD:
    case BTF_KIND_TYPEDEF:
    case BTF_KIND_VOLATILE:
    case BTF_KIND_CONST:
    case BTF_KIND_RESTRICT:
    case BTF_KIND_FUNC:
    case BTF_KIND_FLOAT:
    case BTF_KIND_TYPE_TAG:
      return 0;
    default:
      return absl::UnimplementedError(
          fmt::format("BTF type of kind {}, which this reader does not know",
                      BTF_INFO_KIND(type.info)));
  }
}

}  // namespace

absl::StatusOr<bool> BtfHasVariable(int fd, std::string_view name) {
  btf_header header{};
  const ssize_t got = ::pread(fd, &header, sizeof header, 0);
  if (got < 0) return ErrnoStatus("read", "BTF header");
  if (got != static_cast<ssize_t>(sizeof header) || header.magic != BTF_MAGIC ||
      header.hdr_len < sizeof header) {
    return absl::InvalidArgumentError("not raw BTF (no BTF header)");
  }
  if (header.version != BTF_VERSION) {
    return absl::UnimplementedError(fmt::format("BTF version {}, this reader knows {}",
                                                header.version, BTF_VERSION));
  }
  // The names of every VAR first (the kernel's are its per-CPU variables,
  // a few hundred), then each looked up in the string section.
  std::vector<uint32_t> variable_names;
  BtfReader types(fd, uint64_t{header.hdr_len} + header.type_off, header.type_len);
  while (types.left() > 0) {
    btf_type type{};
    if (absl::Status read = types.Read(&type, sizeof type); !read.ok()) return read;
    absl::StatusOr<uint64_t> trailing = TrailingBytes(type);
    if (!trailing.ok()) return trailing.status();
    if (BTF_INFO_KIND(type.info) == BTF_KIND_VAR) variable_names.push_back(type.name_off);
    if (absl::Status skipped = types.Skip(*trailing); !skipped.ok()) return skipped;
  }
  std::string candidate(name.size() + 1, '\0');
  for (uint32_t name_off : variable_names) {
    if (name_off + name.size() + 1 > header.str_len) continue;
    const uint64_t at = uint64_t{header.hdr_len} + header.str_off + name_off;
    if (::pread(fd, candidate.data(), candidate.size(), static_cast<off_t>(at)) !=
        static_cast<ssize_t>(candidate.size())) {
      return absl::DataLossError("BTF string section cut short");
    }
    if (std::string_view(candidate).substr(0, name.size()) == name && candidate.back() == '\0') {
      return true;
    }
  }
  return false;
}

absl::StatusOr<bool> KernelBtfHasVariable(std::string_view name, std::string_view path) {
  ScopedFd fd(::open(std::string(path).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  absl::StatusOr<bool> found = BtfHasVariable(fd.get(), name);
  if (!found.ok()) {
    return absl::Status(found.status().code(),
                        fmt::format("{}: {}", path, MessageOf(found.status())));
  }
  return found;
}

}  // namespace loupe::symbols
