#include "daemon/probes/x86_sites.h"

#include <capstone/capstone.h>
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <set>

namespace loupe::probes {
namespace {

// One range of code decoded instruction by instruction, with details.
class Decoder {
 public:
  static absl::StatusOr<Decoder> Open(const CodeRange& range) {
    Decoder decoder(range);
    if (cs_open(CS_ARCH_X86, CS_MODE_64, decoder.handle_.get()) != CS_ERR_OK) {
      return absl::InternalError("capstone: cannot open an x86-64 decoder");
    }
    cs_option(*decoder.handle_, CS_OPT_DETAIL, CS_OPT_ON);
    decoder.insn_.reset(cs_malloc(*decoder.handle_));
    return decoder;
  }
  // The next instruction, or null at the end or where bytes do not decode.
  const cs_insn* Next() {
    return left_ > 0 && cs_disasm_iter(*handle_, &code_, &left_, &address_, insn_.get())
               ? insn_.get()
               : nullptr;
  }
  bool done() const { return left_ == 0; }
  uint64_t address() const { return address_; }  // of the next instruction

 private:
  struct Close {
    void operator()(csh* handle) const {
      if (*handle != 0) cs_close(handle);
      delete handle;
    }
  };
  struct Free {
    void operator()(cs_insn* insn) const { cs_free(insn, 1); }
  };
  explicit Decoder(const CodeRange& range)
      : code_(range.bytes.data()), left_(range.bytes.size()), address_(range.address) {}
  std::unique_ptr<csh, Close> handle_{new csh(0)};
  std::unique_ptr<cs_insn, Free> insn_;
  const uint8_t* code_;
  size_t left_;
  uint64_t address_;
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

bool IsTailCallThroughMemory(const cs_insn& insn) {
  const cs_x86& x86 = insn.detail->x86;
  return x86.op_count == 1 && x86.operands[0].type == X86_OP_MEM &&
         x86.operands[0].mem.index == X86_REG_INVALID;
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

absl::Status CanCarryUprobe(const CodeRange& at) {
  absl::StatusOr<Decoder> decoder = Decoder::Open(at);
  if (!decoder.ok()) return decoder.status();
  const cs_insn* insn = decoder->Next();
  if (insn == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("the bytes at {:#x} are no instruction", at.address));
  }
  if (insn->detail->x86.prefix[0] == X86_PREFIX_LOCK) {
    return absl::InvalidArgumentError(fmt::format(
        "its instruction at {:#x} ({} {}) is lock-prefixed, which the kernel will not probe",
        at.address, insn->mnemonic, insn->op_str));
  }
  return absl::OkStatus();
}

std::optional<uint64_t> GoStackCheckEnd(const CodeRange& function) {
  absl::StatusOr<Decoder> decoder = Decoder::Open(function);
  if (!decoder.ok()) return std::nullopt;
  bool compared_with_guard = false;
  // The check is the first thing: CMPQ SP, 16(R14); JLS — for a big frame
  // SP less the frame in R12 first (MOVQ SP, R12; SUBQ $n, R12; JCS; ...).
  const cs_insn* insn = nullptr;
  for (int i = 0; i < 8 && (insn = decoder->Next()) != nullptr; ++i) {
    const cs_x86& x86 = insn->detail->x86;
    if (insn->id == X86_INS_CMP && x86.op_count == 2) {
      for (int op = 0; op < 2; ++op) {
        const cs_x86_op& operand = x86.operands[op];
        if (operand.type == X86_OP_MEM && operand.mem.base == X86_REG_R14 &&
            operand.mem.disp == 16) {
          compared_with_guard = true;
        }
      }
      continue;
    }
    if (compared_with_guard && IsConditionalJump(insn->id)) return decoder->address();
    if (compared_with_guard) return std::nullopt;
  }
  return std::nullopt;
}

absl::StatusOr<ReturnSites> FindReturnSites(const CodeRange& function, const CodeRange& cold) {
  ReturnSites sites;
  // Decoded in a straight line, bytes that are data (or an instruction
  // jumped into the middle of) read as other instructions, among them a
  // ret that is not one: a probe there would corrupt the code. Every
  // direct branch into the function must land where an instruction begins.
  std::set<uint64_t> starts, targets;
  for (const CodeRange* range : {&function, &cold}) {
    absl::StatusOr<Decoder> decoder = Decoder::Open(*range);
    if (!decoder.ok()) return decoder.status();
    while (!decoder->done()) {
      const cs_insn* insn = decoder->Next();
      if (insn == nullptr) {
        return absl::InvalidArgumentError(
            fmt::format("cannot decode the instruction at {:#x} (+{:#x})", decoder->address(),
                        decoder->address() - range->address));
      }
      starts.insert(insn->address);
      const unsigned id = insn->id;
      if (id == X86_INS_RET) {
        sites.addresses.push_back(insn->address);
        continue;
      }
      if (id != X86_INS_JMP && id != X86_INS_CALL && !IsConditionalJump(id)) continue;
      const std::optional<uint64_t> target = DirectTarget(*insn);
      if (!target) {
        // Through a pointer in memory with no index (a GOT slot, a vtable):
        // another function. Through a register, or a table by index: a
        // switch within this one far more often than a tail call.
        if (id == X86_INS_JMP && IsTailCallThroughMemory(*insn)) ++sites.tail_calls;
        continue;
      }
      if (Inside(*target, function) || Inside(*target, cold)) {
        targets.insert(*target);
      } else if (id != X86_INS_CALL) {
        ++sites.tail_calls;
      }
    }
  }
  for (uint64_t target : targets) {
    if (!starts.contains(target)) {
      return absl::InvalidArgumentError(fmt::format(
          "a jump lands at {:#x}, inside what reads as another instruction: data or "
          "overlapping code, so its return instructions cannot be told",
          target));
    }
  }
  return sites;
}

}  // namespace loupe::probes
