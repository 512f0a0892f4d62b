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

// Offsets of the string section at which `name` is a whole string (a
// string may also be another's tail: a type's name is wherever it points).
absl::StatusOr<std::vector<uint32_t>> NameOffsets(int fd, const btf_header& header,
                                                          std::string_view name) {
  const std::string wanted = std::string(name) + '\0';
  std::vector<uint32_t> offsets;
  BtfReader strings(fd, uint64_t{header.hdr_len} + header.str_off, header.str_len);
  std::string window;   // the bytes from `window_start` on, read so far
  uint64_t window_start = 0;
  while (strings.left() > 0) {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(strings.left(), 64 << 10));
    const size_t kept = window.size();
    window.resize(kept + take);
    if (absl::Status read = strings.Read(window.data() + kept, take); !read.ok()) return read;
    // The carried bytes are one short of a match, so each match found
    // ends in the new chunk and is found once.
    for (size_t at = window.find(wanted); at != std::string::npos;
         at = window.find(wanted, at + 1)) {
      offsets.push_back(static_cast<uint32_t>(window_start + at));
    }
    // Keep what a match crossing into the next chunk would start in.
    const size_t carry = std::min(window.size(), wanted.size() - 1);
    window_start += window.size() - carry;
    window.erase(0, window.size() - carry);
  }
  return offsets;
}

}  // namespace

absl::StatusOr<std::optional<uint32_t>> BtfTypeId(int fd, std::string_view name, uint32_t kind) {
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
  // The strings first (the name's few offsets), then the types, numbered
  // from 1 in their order (0 is void).
  absl::StatusOr<std::vector<uint32_t>> named = NameOffsets(fd, header, name);
  if (!named.ok()) return named.status();
  // Walked to its end: a section that lies about its length is an error
  // even past the type wanted.
  std::optional<uint32_t> found;
  BtfReader types(fd, uint64_t{header.hdr_len} + header.type_off, header.type_len);
  for (uint32_t id = 1; types.left() > 0; ++id) {
    btf_type type{};
    if (absl::Status read = types.Read(&type, sizeof type); !read.ok()) return read;
    absl::StatusOr<uint64_t> trailing = TrailingBytes(type);
    if (!trailing.ok()) return trailing.status();
    if (!found && BTF_INFO_KIND(type.info) == kind &&
        std::ranges::find(*named, type.name_off) != named->end()) {
      found = id;
    }
    if (absl::Status skipped = types.Skip(*trailing); !skipped.ok()) return skipped;
  }
  return found;
}

absl::StatusOr<std::optional<uint32_t>> KernelBtfTypeId(std::string_view name, uint32_t kind,
                                                        std::string_view path) {
  ScopedFd fd(::open(std::string(path).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  absl::StatusOr<std::optional<uint32_t>> found = BtfTypeId(fd.get(), name, kind);
  if (!found.ok()) {
    return absl::Status(found.status().code(),
                        fmt::format("{}: {}", path, MessageOf(found.status())));
  }
  return found;
}

}  // namespace loupe::symbols
