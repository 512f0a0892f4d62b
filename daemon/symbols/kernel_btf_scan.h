// Whether the kernel's BTF describes a variable, found by streaming the raw
// BTF through a small buffer. libbpf's parse copies the 5 MiB file twice and
// indexes every type: ~45 ms of fresh pages (page faults) per parse on a VM,
// on the way to every session's first event, for one yes or no.
#ifndef LOUPE_DAEMON_SYMBOLS_KERNEL_BTF_SCAN_H_
#define LOUPE_DAEMON_SYMBOLS_KERNEL_BTF_SCAN_H_

#include <string_view>

#include "absl/status/statusor.h"

namespace loupe::symbols {

inline constexpr std::string_view kKernelBtfPath = "/sys/kernel/btf/vmlinux";

// Whether the raw BTF read from `fd` (at offset 0) has a VAR named `name`.
// An error names what is wrong with the data (not BTF, cut short, a kind
// this reader does not know).
absl::StatusOr<bool> BtfHasVariable(int fd, std::string_view name);
absl::StatusOr<bool> KernelBtfHasVariable(std::string_view name,
                                          std::string_view path = kKernelBtfPath);

}  // namespace loupe::symbols

#endif  // LOUPE_DAEMON_SYMBOLS_KERNEL_BTF_SCAN_H_
