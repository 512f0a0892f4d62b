#include "daemon/probes/return_sites.h"

#include <capstone/capstone.h>
#include <fmt/format.h>

#include <memory>
#include <optional>

namespace loupe::probes {
namespace {

struct HandleClose {
  void operator()(csh* handle) const {
    cs_close(handle);
    delete handle;
  }
};
struct InsnFree {
  void operator()(cs_insn* insn) const { cs_free(insn, 1); }
};

bool Inside(uint64_t target, const CodeRange& range) {
  return target >= range.address && target - range.address < range.bytes.size();
}

// A direct jump's target, or nullopt for an indirect one.
std::optional<uint64_t> DirectTarget(const cs_insn& insn) {
  const cs_x86& x86 = insn.detail->x86;
  if (x86.op_count != 1 || x86.operands[0].type != X86_OP_IMM) return std::nullopt;
  return static_cast<uint64_t>(x86.operands[0].imm);
}

bool IsConditionalJump(unsigned id) {
  switch (id) {
    case X86_INS_JAE: case X86_INS_JA: case X86_INS_JBE: case X86_INS_JB: case X86_INS_JCXZ:
    case X86_INS_JECXZ: case X86_INS_JE: case X86_INS_JGE: case X86_INS_JG: case X86_INS_JLE:
    case X86_INS_JL: case X86_INS_JNE: case X86_INS_JNO: case X86_INS_JNP: case X86_INS_JNS:
    case X86_INS_JO: case X86_INS_JP: case X86_INS_JRCXZ: case X86_INS_JS:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<ReturnSites> FindReturnSites(const CodeRange& function, const CodeRange& cold) {
  std::unique_ptr<csh, HandleClose> handle(new csh(0));
  if (cs_open(CS_ARCH_X86, CS_MODE_64, handle.get()) != CS_ERR_OK) {
    return absl::InternalError("capstone: cannot open an x86-64 decoder");
  }
  cs_option(*handle, CS_OPT_DETAIL, CS_OPT_ON);
  std::unique_ptr<cs_insn, InsnFree> insn(cs_malloc(*handle));
  ReturnSites sites;
  for (const CodeRange* range : {&function, &cold}) {
    const uint8_t* code = range->bytes.data();
    size_t left = range->bytes.size();
    uint64_t address = range->address;
    while (left > 0) {
      if (!cs_disasm_iter(*handle, &code, &left, &address, insn.get())) {
        return absl::InvalidArgumentError(fmt::format(
            "cannot decode the instruction at {:#x} (+{:#x})", address, address - range->address));
      }
      const unsigned id = insn->id;
      if (id == X86_INS_RET) {
        sites.addresses.push_back(insn->address);
        continue;
      }
      if (id != X86_INS_JMP && !IsConditionalJump(id)) continue;
      const std::optional<uint64_t> target = DirectTarget(*insn);
      // Indirect jumps are switch tables within the function far more
      // often than tail calls through a pointer: not taken for exits.
      if (!target || Inside(*target, function) || Inside(*target, cold)) continue;
      ++sites.tail_calls;
    }
  }
  return sites;
}

}  // namespace loupe::probes
