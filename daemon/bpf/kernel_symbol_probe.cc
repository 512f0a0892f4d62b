#include "daemon/bpf/kernel_symbol_probe.h"

#include <bpf/bpf.h>
#include <fmt/format.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loupe::bpf {

absl::StatusOr<bool> VerifierResolvesKernelSymbol(uint32_t btf_id) {
  // r1 = &symbol (ld_imm64 of a BTF id; the second half's imm 0 names the
  // kernel's own BTF, not a module's); r0 = 0; exit.
  const bpf_insn program[] = {
      {.code = BPF_LD | BPF_DW | BPF_IMM,
       .dst_reg = BPF_REG_1,
       .src_reg = BPF_PSEUDO_BTF_ID,
       .off = 0,
       .imm = static_cast<int32_t>(btf_id)},
      {.code = 0, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
  };
  const int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "loupe_ksym", "GPL", program,
                               sizeof program / sizeof program[0], nullptr);
  if (fd >= 0) {
    close(fd);
    return true;
  }
  // The verifier's "failed to find the address for kernel symbol".
  if (fd == -ENOENT) return false;
  return absl::Status(
      fd == -EPERM || fd == -EACCES ? absl::StatusCode::kPermissionDenied
                                    : absl::StatusCode::kFailedPrecondition,
      fmt::format("a program taking a kernel symbol's address (BTF id {}) was refused: {}", btf_id,
                  std::strerror(-fd)));
}

}  // namespace loupe::bpf
