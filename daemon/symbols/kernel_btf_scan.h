// A kernel type's BTF id by name, found by streaming the raw BTF through a
// small buffer. libbpf's parse copies the 5 MiB file twice and indexes
// every type: ~45 ms of fresh pages (page faults) per parse on a VM, on the
// way to every session's first event, for one id.
#ifndef LOUPE_DAEMON_SYMBOLS_KERNEL_BTF_SCAN_H_
#define LOUPE_DAEMON_SYMBOLS_KERNEL_BTF_SCAN_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

namespace loupe::symbols {

inline constexpr std::string_view kKernelBtfPath = "/sys/kernel/btf/vmlinux";

// The id of the first type of `kind` (BTF_KIND_VAR, BTF_KIND_FUNC, ...)
// named `name` in the raw BTF read from `fd` (at offset 0); nullopt when
// there is none. An error names what is wrong with the data (not BTF, cut
// short, a kind this reader does not know).
absl::StatusOr<std::optional<uint32_t>> BtfTypeId(int fd, std::string_view name, uint32_t kind);
absl::StatusOr<std::optional<uint32_t>> KernelBtfTypeId(std::string_view name, uint32_t kind,
                                                        std::string_view path = kKernelBtfPath);

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_KERNEL_BTF_SCAN_H_
