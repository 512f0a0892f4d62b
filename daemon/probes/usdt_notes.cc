#include "daemon/probes/usdt_notes.h"

#include <fmt/format.h>
#include <sys/user.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstddef>
#include <cstring>

namespace loupe::probes {
namespace {

constexpr uint32_t kStapsdtNoteType = 3;

uint32_t Align4(uint32_t n) { return (n + 3) & ~3u; }

// Takes a NUL-terminated string from the front of `desc`.
bool TakeString(std::span<const uint8_t>* desc, std::string* out) {
  const void* end = std::memchr(desc->data(), 0, desc->size());
  if (end == nullptr) return false;
  const size_t length = static_cast<const uint8_t*>(end) - desc->data();
  out->assign(reinterpret_cast<const char*>(desc->data()), length);
  *desc = desc->subspan(length + 1);
  return true;
}

uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct Register {
  std::string_view name;
  size_t home;  // offset in struct pt_regs (same layout as user_regs_struct)
  uint8_t width;
};

#define LOUPE_REG(name, full, width) {name, offsetof(user_regs_struct, full), width}
constexpr Register kRegisters[] = {
    LOUPE_REG("rax", rax, 8), LOUPE_REG("eax", rax, 4), LOUPE_REG("ax", rax, 2), LOUPE_REG("al", rax, 1),
    LOUPE_REG("rbx", rbx, 8), LOUPE_REG("ebx", rbx, 4), LOUPE_REG("bx", rbx, 2), LOUPE_REG("bl", rbx, 1),
    LOUPE_REG("rcx", rcx, 8), LOUPE_REG("ecx", rcx, 4), LOUPE_REG("cx", rcx, 2), LOUPE_REG("cl", rcx, 1),
    LOUPE_REG("rdx", rdx, 8), LOUPE_REG("edx", rdx, 4), LOUPE_REG("dx", rdx, 2), LOUPE_REG("dl", rdx, 1),
    LOUPE_REG("rsi", rsi, 8), LOUPE_REG("esi", rsi, 4), LOUPE_REG("si", rsi, 2), LOUPE_REG("sil", rsi, 1),
    LOUPE_REG("rdi", rdi, 8), LOUPE_REG("edi", rdi, 4), LOUPE_REG("di", rdi, 2), LOUPE_REG("dil", rdi, 1),
    LOUPE_REG("rbp", rbp, 8), LOUPE_REG("ebp", rbp, 4), LOUPE_REG("bp", rbp, 2), LOUPE_REG("bpl", rbp, 1),
    LOUPE_REG("rsp", rsp, 8), LOUPE_REG("esp", rsp, 4), LOUPE_REG("sp", rsp, 2), LOUPE_REG("spl", rsp, 1),
    LOUPE_REG("r8", r8, 8),   LOUPE_REG("r8d", r8, 4),   LOUPE_REG("r8w", r8, 2),   LOUPE_REG("r8b", r8, 1),
    LOUPE_REG("r9", r9, 8),   LOUPE_REG("r9d", r9, 4),   LOUPE_REG("r9w", r9, 2),   LOUPE_REG("r9b", r9, 1),
    LOUPE_REG("r10", r10, 8), LOUPE_REG("r10d", r10, 4), LOUPE_REG("r10w", r10, 2), LOUPE_REG("r10b", r10, 1),
    LOUPE_REG("r11", r11, 8), LOUPE_REG("r11d", r11, 4), LOUPE_REG("r11w", r11, 2), LOUPE_REG("r11b", r11, 1),
    LOUPE_REG("r12", r12, 8), LOUPE_REG("r12d", r12, 4), LOUPE_REG("r12w", r12, 2), LOUPE_REG("r12b", r12, 1),
    LOUPE_REG("r13", r13, 8), LOUPE_REG("r13d", r13, 4), LOUPE_REG("r13w", r13, 2), LOUPE_REG("r13b", r13, 1),
    LOUPE_REG("r14", r14, 8), LOUPE_REG("r14d", r14, 4), LOUPE_REG("r14w", r14, 2), LOUPE_REG("r14b", r14, 1),
    LOUPE_REG("r15", r15, 8), LOUPE_REG("r15d", r15, 4), LOUPE_REG("r15w", r15, 2), LOUPE_REG("r15b", r15, 1),
    LOUPE_REG("rip", rip, 8),
};
#undef LOUPE_REG

const Register* FindRegister(std::string_view name) {
  for (const Register& reg : kRegisters) {
    if (reg.name == name) return &reg;
  }
  return nullptr;
}

bool ParseInt(std::string_view text, int64_t* out) {
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  uint64_t magnitude = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), magnitude, base);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return false;
  *out = static_cast<int64_t>(negative ? 0 - magnitude : magnitude);
  return true;
}

absl::StatusOr<UsdtArg> ParseOne(std::string_view token) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(fmt::format("argument '{}': {}", token, why));
  };
  const size_t at = token.find('@');
  if (at == std::string_view::npos) return bad("no '@' between size and operand");
  int64_t size = 0;
  if (!ParseInt(token.substr(0, at), &size) || size == 0 || std::abs(size) > 8 ||
      (std::abs(size) & (std::abs(size) - 1)) != 0) {
    return bad("size must be 1, 2, 4 or 8, negative when signed");
  }
  UsdtArg arg;
  arg.is_signed = size < 0;
  arg.size = static_cast<uint8_t>(std::abs(size));
  std::string_view operand = token.substr(at + 1);
  if (operand.empty()) return bad("empty operand");

  if (operand[0] == '$') {
    if (!ParseInt(operand.substr(1), &arg.value)) return bad("constant is not a number");
    arg.kind = UsdtArgKind::kConstant;
    return arg;
  }
  if (operand[0] == '%') {
    const Register* reg = FindRegister(operand.substr(1));
    if (reg == nullptr || reg->name == "rip") return bad("unknown or unsupported register");
    arg.kind = UsdtArgKind::kRegister;
    arg.reg = reg->name;
    arg.reg_offset = static_cast<uint16_t>(reg->home);
    arg.size = std::min(arg.size, reg->width);
    return arg;
  }
  // DISPLACEMENT(%reg) or SYMBOL[+-N](%rip)
  const size_t open = operand.find('(');
  if (open == std::string_view::npos || operand.back() != ')' || operand[open + 1] != '%') {
    return bad("unsupported operand form (expected $N, %reg, N(%reg) or symbol(%rip))");
  }
  const std::string_view reg_name = operand.substr(open + 2, operand.size() - open - 3);
  if (reg_name.find(',') != std::string_view::npos) {
    return bad("indexed memory operands are not supported");
  }
  const Register* reg = FindRegister(reg_name);
  if (reg == nullptr || reg->width != 8) return bad("base register must be a 64-bit register");
  const std::string_view displacement = operand.substr(0, open);
  if (reg->name == "rip") {
    // SYMBOL, SYMBOL+N, SYMBOL-N or N+SYMBOL (GCC writes the offset first
    // for a member of a static struct: "40+CheckpointStats").
    arg.kind = UsdtArgKind::kRipRelative;
    auto starts_number = [](std::string_view text) {
      return !text.empty() &&
             (std::isdigit(static_cast<unsigned char>(text[0])) != 0 || text[0] == '-');
    };
    std::string_view symbol = displacement;
    std::string_view offset;
    if (starts_number(displacement)) {
      const size_t plus = displacement.find('+', 1);
      if (plus == std::string_view::npos || starts_number(displacement.substr(plus + 1))) {
        // A plain number: relative to the next instruction, which we cannot know.
        return bad("RIP-relative operands need a symbol");
      }
      offset = displacement.substr(0, plus);
      symbol = displacement.substr(plus + 1);
    } else if (const size_t split = displacement.find_first_of("+-", 1);
               split != std::string_view::npos) {
      offset = displacement.substr(split);
      symbol = displacement.substr(0, split);
    }
    if (symbol.empty()) return bad("RIP-relative operands need a symbol");
    arg.symbol = std::string(symbol);
    if (!offset.empty() && !ParseInt(offset, &arg.value)) {
      return bad("symbol offset is not a number");
    }
    return arg;
  }
  arg.kind = UsdtArgKind::kMemory;
  arg.reg = reg->name;
  arg.reg_offset = static_cast<uint16_t>(reg->home);
  if (!displacement.empty() && !ParseInt(displacement, &arg.value)) {
    return bad("displacement is not a number");
  }
  return arg;
}

}  // namespace

absl::StatusOr<std::vector<UsdtNote>> ParseUsdtNotes(std::span<const uint8_t> section) {
  std::vector<UsdtNote> notes;
  size_t offset = 0;
  for (int index = 0; offset < section.size(); ++index) {
    auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(
          fmt::format("malformed USDT note #{} at offset {}: {}", index, offset, why));
    };
    if (section.size() - offset < 12) return bad("truncated note header");
    uint32_t header[3];
    std::memcpy(header, section.data() + offset, sizeof header);
    const uint32_t name_size = header[0], desc_size = header[1], type = header[2];
    const size_t name_at = offset + 12;
    if (Align4(name_size) < name_size || section.size() - name_at < Align4(name_size)) {
      return bad("name runs past the section");
    }
    const size_t desc_at = name_at + Align4(name_size);
    if (Align4(desc_size) < desc_size || section.size() - desc_at < desc_size) {
      return bad("descriptor runs past the section");
    }
    const std::string_view name(reinterpret_cast<const char*>(section.data() + name_at),
                                name_size);
    offset = desc_at + std::min<size_t>(Align4(desc_size), section.size() - desc_at);
    if (type != kStapsdtNoteType || name != std::string_view("stapsdt\0", 8)) continue;

    std::span<const uint8_t> desc = section.subspan(desc_at, desc_size);
    if (desc.size() < 24) return bad("descriptor shorter than its three addresses");
    UsdtNote note;
    note.pc = Load64(desc.data());
    note.base = Load64(desc.data() + 8);
    note.semaphore = Load64(desc.data() + 16);
    desc = desc.subspan(24);
    if (!TakeString(&desc, &note.provider) || !TakeString(&desc, &note.name) ||
        !TakeString(&desc, &note.args)) {
      return bad("provider, name and arguments must be NUL-terminated");
    }
    if (note.provider.empty() || note.name.empty()) return bad("empty provider or probe name");
    notes.push_back(std::move(note));
  }
  return notes;
}

absl::StatusOr<std::vector<UsdtArg>> ParseUsdtArgs(std::string_view args) {
  std::vector<UsdtArg> parsed;
  while (!args.empty()) {
    const size_t start = args.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    args.remove_prefix(start);
    const size_t end = std::min(args.find(' '), args.size());
    absl::StatusOr<UsdtArg> arg = ParseOne(args.substr(0, end));
    if (!arg.ok()) return arg.status();
    parsed.push_back(*std::move(arg));
    args.remove_prefix(end);
    if (parsed.size() > 12) {
      return absl::InvalidArgumentError("more than 12 arguments (the SDT limit)");
    }
  }
  return parsed;
}

}  // namespace loupe::probes
