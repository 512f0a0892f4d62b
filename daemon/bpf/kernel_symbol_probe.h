// Whether the verifier can resolve a kernel symbol that a program names by
// its BTF id (a typed __ksym): it looks the name up in kallsyms, which
// lists variables only with CONFIG_KALLSYMS_ALL. Asked by loading a
// four-instruction program that takes the symbol's address: ~1 ms, where
// reading /proc/kallsyms for the answer takes 50-75 ms and a failed load
// of a session's programs 100 ms.
#ifndef LOUPE_DAEMON_BPF_KERNEL_SYMBOL_PROBE_H_
#define LOUPE_DAEMON_BPF_KERNEL_SYMBOL_PROBE_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace loupe::bpf {

// `btf_id` is a VAR or FUNC of the kernel's own BTF (/sys/kernel/btf/vmlinux).
// False when the verifier does not find its address; an error when the
// program could not be loaded for another reason (no CAP_BPF, a kernel
// without typed kernel symbols), which the error names.
absl::StatusOr<bool> VerifierResolvesKernelSymbol(uint32_t btf_id);

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_KERNEL_SYMBOL_PROBE_H_
