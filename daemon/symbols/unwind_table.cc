#include "daemon/symbols/unwind_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fmt/format.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "daemon/base/status_util.h"
#include "daemon/symbols/go_stack_ends.h"

namespace loupe::symbols {
namespace {

// libdw interprets an FDE's instructions from its start for every row it is
// asked about, so one long FDE costs its rows times its bytes. This bounds
// the sum over a file: system libraries and interpreters need 2 to 4 MiB,
// and a crafted file stops after seconds instead of hours.
constexpr uint64_t kMaxInstructionBytes = uint64_t{1} << 30;

constexpr int kRbp = 6;
constexpr int kRsp = 7;
constexpr int kReturnAddress = 16;
constexpr int kLastGeneralRegister = 15;  // r15; 16 is the return address column

struct ElfEnd {
  void operator()(Elf* elf) const { elf_end(elf); }
};
struct DwarfEnd {
  void operator()(Dwarf* dwarf) const { dwarf_end(dwarf); }
};
struct CfiEnd {
  void operator()(Dwarf_CFI* cfi) const { dwarf_cfi_end(cfi); }
};
struct FrameFree {
  void operator()(Dwarf_Frame* frame) const { std::free(frame); }
};

// A section's bytes, as loaded at `address`.
struct Section {
  std::string_view name;
  Elf_Data* data = nullptr;
  uint64_t address = 0;

  const uint8_t* begin() const { return static_cast<const uint8_t*>(data->d_buf); }
  const uint8_t* end() const { return begin() + data->d_size; }
  size_t size() const { return data->d_size; }
};

absl::Status SectionError(std::string_view section, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", section, what));
}

std::string LibdwError() { return fmt::format("libdw: {}", dwarf_errmsg(-1)); }

// Reads the little-endian, DW_EH_PE-encoded values of .eh_frame_hdr and of
// CIE augmentations. Only the encodings x86-64 toolchains emit; false for
// others and at the end of the bytes.
class Cursor {
 public:
  Cursor(const Section& section, const uint8_t* at, const uint8_t* end)
      : section_(section), at_(at), end_(end) {}

  const uint8_t* at() const { return at_; }

  bool Byte(uint8_t* value) {
    if (at_ >= end_) return false;
    *value = *at_++;
    return true;
  }

  // `data_base` is what DW_EH_PE_datarel is relative to, where it has a meaning.
  bool Encoded(uint8_t encoding, std::optional<uint64_t> data_base, uint64_t* value) {
    if ((encoding & DW_EH_PE_indirect) != 0) return false;
    const uint64_t field_address = section_.address + static_cast<uint64_t>(at_ - section_.begin());
    uint64_t raw = 0;
    bool ok = false;
    switch (encoding & 0x0f) {
      case DW_EH_PE_absptr:
      case DW_EH_PE_udata8:
      case DW_EH_PE_sdata8:
        ok = Fixed(8, &raw);
        break;
      case DW_EH_PE_udata2:
        ok = Fixed(2, &raw);
        break;
      case DW_EH_PE_sdata2:
        ok = Fixed(2, &raw);
        raw = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(raw)));
        break;
      case DW_EH_PE_udata4:
        ok = Fixed(4, &raw);
        break;
      case DW_EH_PE_sdata4:
        ok = Fixed(4, &raw);
        raw = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(raw)));
        break;
      case DW_EH_PE_uleb128:
        ok = Leb128(false, &raw);
        break;
      case DW_EH_PE_sleb128:
        ok = Leb128(true, &raw);
        break;
      default:
        return false;
    }
    if (!ok) return false;
    switch (encoding & 0x70) {
      case DW_EH_PE_absptr:
        break;
      case DW_EH_PE_pcrel:
        raw += field_address;
        break;
      case DW_EH_PE_datarel:
        if (!data_base) return false;
        raw += *data_base;
        break;
      default:
        return false;
    }
    *value = raw;
    return true;
  }

 private:
  bool Fixed(size_t size, uint64_t* value) {
    if (static_cast<size_t>(end_ - at_) < size) return false;
    *value = 0;
    for (size_t i = 0; i < size; ++i) *value |= uint64_t{at_[i]} << (8 * i);
    at_ += size;
    return true;
  }

  bool Leb128(bool is_signed, uint64_t* value) {
    *value = 0;
    for (unsigned shift = 0; at_ < end_; shift += 7) {
      const uint8_t byte = *at_++;
      if (shift < 64) *value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) {
        if (is_signed && shift + 7 < 64 && (byte & 0x40) != 0)
          *value |= ~uint64_t{0} << (shift + 7);
        return true;
      }
    }
    return false;
  }

  const Section& section_;
  const uint8_t* at_;
  const uint8_t* end_;
};

struct FdeRange {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t size = 0;  // bytes of the FDE after its CIE pointer
};

// Decodes FDEs' address ranges from a CFI section: libdw evaluates rules at
// an address but lists no FDEs, and the walk must know where each one ends.
class FdeReader {
 public:
  FdeReader(Elf* elf, const Section& section, bool eh_frame)
      : ident_(reinterpret_cast<const unsigned char*>(elf_getident(elf, nullptr))),
        section_(section),
        eh_frame_(eh_frame) {}

  // The FDE at `offset`; an empty range for one that covers no code.
  absl::StatusOr<FdeRange> Read(Dwarf_Off offset) {
    Dwarf_CFI_Entry entry;
    Dwarf_Off next = 0;
    if (dwarf_next_cfi(ident_, section_.data, eh_frame_, offset, &next, &entry) != 0) {
      return Error(offset, LibdwError());
    }
    if (dwarf_cfi_cie_p(&entry)) return Error(offset, "a CIE where an FDE was expected");
    absl::StatusOr<uint8_t> encoding = Encoding(entry.fde.CIE_pointer);
    if (!encoding.ok()) return encoding.status();
    // .debug_frame addresses are plain 8-byte values, whatever a CIE says.
    const uint8_t pointer = eh_frame_ ? *encoding : uint8_t{DW_EH_PE_absptr};
    Cursor cursor(section_, entry.fde.start, entry.fde.end);
    uint64_t start = 0, length = 0;
    if (!cursor.Encoded(pointer, std::nullopt, &start) ||
        !cursor.Encoded(pointer & 0x0f, std::nullopt, &length)) {
      return Error(offset, fmt::format("address range not readable (encoding {:#x})", pointer));
    }
    // Length 0, or start 0: code a linker discarded (.debug_frame keeps its
    // FDEs, with the address resolved to 0).
    if (length == 0 || start == 0 || start + length < start) return FdeRange{};
    return FdeRange{start, start + length, static_cast<uint64_t>(entry.fde.end - entry.fde.start)};
  }

  // Every FDE, in section order.
  absl::StatusOr<std::vector<FdeRange>> ReadAll() {
    std::vector<FdeRange> fdes;
    Dwarf_Off offset = 0;
    for (;;) {
      Dwarf_CFI_Entry entry;
      Dwarf_Off next = 0;
      const int result = dwarf_next_cfi(ident_, section_.data, eh_frame_, offset, &next, &entry);
      if (result > 0) break;
      if (result < 0) return Error(offset, LibdwError());
      if (!dwarf_cfi_cie_p(&entry)) {
        absl::StatusOr<FdeRange> fde = Read(offset);
        if (!fde.ok()) return fde.status();
        if (fde->end != 0) fdes.push_back(*fde);
      }
      offset = next;
    }
    return fdes;
  }

 private:
  absl::Status Error(Dwarf_Off offset, std::string_view what) const {
    return SectionError(section_.name, fmt::format("entry at offset {:#x}: {}", offset, what));
  }

  // The pointer encoding of the FDEs of the CIE at `offset` (its 'R'
  // augmentation), absptr when it says none.
  absl::StatusOr<uint8_t> Encoding(Dwarf_Off offset) {
    if (auto known = encodings_.find(offset); known != encodings_.end()) return known->second;
    Dwarf_CFI_Entry entry;
    Dwarf_Off next = 0;
    if (dwarf_next_cfi(ident_, section_.data, eh_frame_, offset, &next, &entry) != 0) {
      return Error(offset, fmt::format("the CIE of an FDE: {}", LibdwError()));
    }
    if (!dwarf_cfi_cie_p(&entry)) return Error(offset, "an FDE's CIE pointer leads to an FDE");
    uint8_t encoding = DW_EH_PE_absptr;
    const char* augmentation = entry.cie.augmentation;
    if (augmentation[0] == 'z') {
      Cursor cursor(section_, entry.cie.augmentation_data,
                    entry.cie.augmentation_data + entry.cie.augmentation_data_size);
      bool ok = true;
      for (const char* at = augmentation + 1; ok && *at != '\0'; ++at) {
        uint8_t byte = 0;
        uint64_t ignored = 0;
        if (*at == 'R') {
          ok = cursor.Byte(&encoding);
          break;
        }
        if (*at == 'L') {
          ok = cursor.Byte(&byte);
        } else if (*at == 'P') {
          // Only skipped: its size is in the format bits, whatever it is relative to.
          ok = cursor.Byte(&byte) && cursor.Encoded(byte & 0x0f, std::nullopt, &ignored);
        } else if (*at != 'S' && *at != 'B') {
          break;  // unknown: what follows cannot be found, and libdw stops here too
        }
      }
      if (!ok)
        return Error(offset, fmt::format("CIE augmentation \"{}\" not readable", augmentation));
    }
    encodings_.emplace(offset, encoding);
    return encoding;
  }

  const unsigned char* ident_;
  const Section& section_;
  bool eh_frame_;
  std::map<Dwarf_Off, uint8_t> encodings_;
};

// The FDEs .eh_frame_hdr's binary search table lists; empty when the header
// has no table, or one in a form not read here, so that the caller walks
// .eh_frame. What libdw would refuse in the header is an error here, named.
absl::StatusOr<std::vector<FdeRange>> ReadHeaderTable(const Section& header,
                                                      const Section& eh_frame, FdeReader& reader) {
  Cursor cursor(header, header.begin(), header.end());
  uint8_t version = 0, pointer_encoding = 0, count_encoding = 0, table_encoding = 0;
  if (!cursor.Byte(&version) || !cursor.Byte(&pointer_encoding) || !cursor.Byte(&count_encoding) ||
      !cursor.Byte(&table_encoding)) {
    return SectionError(header.name, fmt::format("{} bytes, too short", header.size()));
  }
  if (version != 1) return SectionError(header.name, fmt::format("version {}, not 1", version));
  uint64_t eh_frame_address = 0, count = 0;
  if (pointer_encoding == DW_EH_PE_omit ||
      !cursor.Encoded(pointer_encoding, header.address, &eh_frame_address)) {
    return SectionError(
        header.name,
        fmt::format(".eh_frame's address not readable (encoding {:#x})", pointer_encoding));
  }
  if (count_encoding == DW_EH_PE_omit || table_encoding == DW_EH_PE_omit ||
      !cursor.Encoded(count_encoding, header.address, &count) ||
      eh_frame_address != eh_frame.address) {
    return std::vector<FdeRange>{};
  }
  size_t entry_size = 0;
  switch (table_encoding & 0x0f) {
    case DW_EH_PE_udata4:
    case DW_EH_PE_sdata4:
      entry_size = 8;
      break;
    case DW_EH_PE_udata8:
    case DW_EH_PE_sdata8:
      entry_size = 16;
      break;
    default:
      return std::vector<FdeRange>{};
  }
  const uint8_t application = table_encoding & 0x70;
  if (application != DW_EH_PE_datarel && application != DW_EH_PE_absptr) {
    return std::vector<FdeRange>{};
  }
  const size_t table_size = static_cast<size_t>(header.end() - cursor.at());
  if (count > table_size / entry_size) {
    return SectionError(header.name,
                        fmt::format("its table of {} FDEs ({} bytes each) runs past the "
                                    "section's {} bytes",
                                    count, entry_size, header.size()));
  }
  std::vector<FdeRange> fdes;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t start = 0, fde_address = 0;
    cursor.Encoded(table_encoding, header.address, &start);
    cursor.Encoded(table_encoding, header.address, &fde_address);
    if (fde_address < eh_frame.address || fde_address - eh_frame.address >= eh_frame.size()) {
      return SectionError(header.name, fmt::format("entry {} points at {:#x}, outside {}", i,
                                                   fde_address, eh_frame.name));
    }
    absl::StatusOr<FdeRange> fde = reader.Read(fde_address - eh_frame.address);
    if (!fde.ok()) return fde.status();
    if (fde->end == 0) continue;
    if (fde->start != start) {
      return SectionError(header.name, fmt::format("entry {} says {:#x}, its FDE says {:#x}", i,
                                                   start, fde->start));
    }
    fdes.push_back(*fde);
  }
  return fdes;
}

// Where libdw says a register was saved, for the rule offset(N): it comes as
// DW_OP_call_frame_cfa then DW_OP_plus_uconst N (a negative N wrapped to
// unsigned), or the first alone for N = 0. Anything else is not offset(N).
bool SavedAt(const Dwarf_Op* ops, size_t count, int64_t* offset) {
  if (count == 0 || ops[0].atom != DW_OP_call_frame_cfa) return false;
  if (count == 1) {
    *offset = 0;
    return true;
  }
  if (count != 2 || ops[1].atom != DW_OP_plus_uconst) return false;
  *offset = static_cast<int64_t>(ops[1].number);
  return true;
}

// A CFA of register + N: libdw gives def_cfa(reg, N) as DW_OP_bregx reg N;
// an expression of the single DW_OP_breg<reg> N means the same.
bool RegisterPlus(const Dwarf_Op* ops, size_t count, int* reg, int64_t* offset) {
  if (count != 1) return false;
  if (ops[0].atom == DW_OP_bregx) {
    if (ops[0].number > 31) return false;
    *reg = static_cast<int>(ops[0].number);
    *offset = static_cast<int64_t>(ops[0].number2);
    return true;
  }
  if (ops[0].atom < DW_OP_breg0 || ops[0].atom > DW_OP_breg31) return false;
  *reg = ops[0].atom - DW_OP_breg0;
  *offset = static_cast<int64_t>(ops[0].number);
  return true;
}

bool FitsInt32(int64_t value) {
  return value >= std::numeric_limits<int32_t>::min() &&
         value <= std::numeric_limits<int32_t>::max();
}

// The CFA of binutils' classic lazy .plt (16-byte entries: jmp *GOT, push
// index, jmp .plt0): the push has been made from byte 11 of an entry on. The
// same expression with DW_OP_lit10 (the BND and IBT .plt layouts) has its
// push elsewhere, which kPlt does not say, so it stays unsupported.
bool IsLazyPlt(const Dwarf_Op* ops, size_t count) {
  static constexpr std::pair<uint8_t, int64_t> kPattern[] = {
      {DW_OP_breg7, 8}, {DW_OP_breg16, 0}, {DW_OP_lit15, 0}, {DW_OP_and, 0}, {DW_OP_lit11, 0},
      {DW_OP_ge, 0},    {DW_OP_lit3, 0},   {DW_OP_shl, 0},   {DW_OP_plus, 0}};
  if (count != std::size(kPattern)) return false;
  for (size_t i = 0; i < count; ++i) {
    if (ops[i].atom != kPattern[i].first ||
        static_cast<int64_t>(ops[i].number) != kPattern[i].second) {
      return false;
    }
  }
  return true;
}

// The row for one libdw frame state; kind kNone when its rules are not ones
// a BPF walker follows.
absl::StatusOr<UnwindRow> RuleOf(Dwarf_Frame* frame, int return_register, bool signal) {
  UnwindRow row;
  const UnwindRow unsupported{.kind = UnwindKind::kUnsupported};
  if (signal) {
    row.kind = UnwindKind::kSignal;
    return row;
  }
  Dwarf_Op memory[3];
  Dwarf_Op* ops = nullptr;
  size_t count = 0;
  if (dwarf_frame_register(frame, return_register, memory, &ops, &count) != 0) {
    return absl::InvalidArgumentError(fmt::format("return address rule: {}", LibdwError()));
  }
  // No operations in libdw's own array means "undefined"; a null array means "same value".
  if (count == 0 && ops == memory) {
    row.kind = UnwindKind::kOutermost;
    return row;
  }
  int64_t offset = 0;
  if (return_register != kReturnAddress || !SavedAt(ops, count, &offset) || offset != -8) {
    return unsupported;
  }

  if (dwarf_frame_cfa(frame, &ops, &count) != 0) {
    return absl::InvalidArgumentError(fmt::format("CFA rule: {}", LibdwError()));
  }
  int base = -1;
  int64_t cfa_offset = 0;
  if (RegisterPlus(ops, count, &base, &cfa_offset) && base <= kLastGeneralRegister &&
      FitsInt32(cfa_offset)) {
    row.kind = base == kRsp   ? UnwindKind::kCfaRsp
               : base == kRbp ? UnwindKind::kCfaRbp
                              : UnwindKind::kCfaRegister;
    row.cfa_offset = static_cast<int32_t>(cfa_offset);
    if (row.kind == UnwindKind::kCfaRegister) row.cfa_register = static_cast<uint8_t>(base);
  } else if (IsLazyPlt(ops, count)) {
    row.kind = UnwindKind::kPlt;
    row.cfa_offset = 8;
  } else if (count == 2 && RegisterPlus(ops, 1, &base, &cfa_offset) && base == kRbp &&
             ops[1].atom == DW_OP_deref && FitsInt32(cfa_offset)) {
    row.kind = UnwindKind::kCfaDerefRbp;
    row.cfa_offset = static_cast<int32_t>(cfa_offset);
  } else {
    return unsupported;
  }

  if (dwarf_frame_register(frame, kRbp, memory, &ops, &count) != 0) {
    return absl::InvalidArgumentError(fmt::format("rbp rule: {}", LibdwError()));
  }
  // A realigned frame (gcc's DRAP) says where rbp was saved by expression,
  // from rbp itself: libdw gives it as DW_OP_call_frame_cfa, DW_OP_breg6 N.
  if (count == 2 && ops[0].atom == DW_OP_call_frame_cfa && RegisterPlus(ops + 1, 1, &base, &offset) &&
      base == kRbp && FitsInt32(offset)) {
    row.rbp_from_rbp = true;
    row.rbp_offset = static_cast<int32_t>(offset);
  } else if (count != 0) {
    if (!SavedAt(ops, count, &offset) || offset == 0 || !FitsInt32(offset)) return unsupported;
    row.rbp_offset = static_cast<int32_t>(offset);
  }
  return row;
}

class TableWriter {
 public:
  explicit TableWriter(std::string_view section) : section_(section) {}

  // Rows of each FDE from its start to its end or the next FDE's start,
  // whichever comes first; then kNone up to the next FDE.
  absl::Status Walk(Dwarf_CFI* cfi, std::vector<FdeRange> fdes) {
    std::stable_sort(fdes.begin(), fdes.end(),
                     [](const FdeRange& a, const FdeRange& b) { return a.start < b.start; });
    for (size_t i = 0; i < fdes.size(); ++i) {
      const FdeRange& fde = fdes[i];
      if (i > 0 && fde.start == fdes[i - 1].start) continue;
      size_t next = i + 1;
      while (next < fdes.size() && fdes[next].start == fde.start) ++next;
      const uint64_t next_start =
          next < fdes.size() ? fdes[next].start : std::numeric_limits<uint64_t>::max();
      absl::Status status = WalkFde(cfi, fde, std::min(fde.end, next_start));
      if (status.ok() && fde.end < next_start) status = Append(fde.end, UnwindRow{});
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

  UnwindTable Take() { return std::move(table_); }

 private:
  absl::Status WalkFde(Dwarf_CFI* cfi, const FdeRange& fde, uint64_t bound) {
    ++table_.functions;
    size_t rows = 0;
    for (uint64_t address = fde.start; address < bound; ++rows) {
      const auto error = [&](std::string_view what) {
        return SectionError(section_, fmt::format("FDE {:#x}..{:#x}, row at {:#x}: {}", fde.start,
                                                  fde.end, address, what));
      };
      instruction_bytes_ += fde.size;
      if (instruction_bytes_ > kMaxInstructionBytes) {
        return error(
            fmt::format("more than {} bytes of CFI instructions to interpret ({} rows "
                        "of this FDE so far, {} bytes each)",
                        kMaxInstructionBytes, rows, fde.size));
      }
      Dwarf_Frame* raw = nullptr;
      if (dwarf_cfi_addrframe(cfi, address, &raw) != 0) return error(LibdwError());
      const std::unique_ptr<Dwarf_Frame, FrameFree> frame(raw);
      // The row's start is not used: after DW_CFA_restore_state libdw gives
      // the start of the row whose state was remembered.
      Dwarf_Addr start = 0, end = 0;
      bool signal = false;
      const int return_register = dwarf_frame_info(frame.get(), &start, &end, &signal);
      if (return_register < 0) return error(LibdwError());
      if (end <= address) return error(fmt::format("the row ends at {:#x}, before it starts", end));
      absl::StatusOr<UnwindRow> row = RuleOf(frame.get(), return_register, signal);
      if (!row.ok()) return error(MessageOf(row.status()));
      if (row->kind == UnwindKind::kUnsupported) ++table_.unsupported;
      absl::Status appended = Append(address, *row);
      if (!appended.ok()) return appended;
      address = end;
    }
    return absl::OkStatus();
  }

  absl::Status Append(uint64_t address, UnwindRow row) {
    if (++rows_seen_ > kMaxUnwindRows) {
      return SectionError(section_, fmt::format("more than {} rows", kMaxUnwindRows));
    }
    row.address = address;
    if (!table_.rows.empty()) {
      const UnwindRow& last = table_.rows.back();
      if (last.kind == row.kind && last.cfa_offset == row.cfa_offset &&
          last.rbp_offset == row.rbp_offset) {
        return absl::OkStatus();
      }
    }
    table_.rows.push_back(row);
    return absl::OkStatus();
  }

  std::string_view section_;
  UnwindTable table_;
  size_t rows_seen_ = 0;
  uint64_t instruction_bytes_ = 0;
};

// The section named `name` that has bytes in the file (a separate debug
// file keeps .eh_frame's header but not its bytes).
absl::StatusOr<Section> FindSection(Elf* elf, std::string_view name) {
  size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) != 0) return Section{name};
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr || header.sh_type == SHT_NOBITS) continue;
    const char* found = elf_strptr(elf, names, header.sh_name);
    if (found == nullptr || name != found) continue;
    if ((header.sh_flags & SHF_COMPRESSED) != 0 && elf_compress(scn, 0, 0) < 0) {
      return SectionError(name, fmt::format("cannot decompress: {}", elf_errmsg(-1)));
    }
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || data->d_buf == nullptr) {
      return SectionError(name, fmt::format("cannot read: {}", elf_errmsg(-1)));
    }
    return Section{name, data, header.sh_addr};
  }
  return Section{name};
}

absl::StatusOr<UnwindTable> FromEhFrame(Elf* elf, const Section& eh_frame, const Section& header) {
  // The header first: libdw refuses a broken one without saying what is wrong.
  FdeReader reader(elf, eh_frame, true);
  absl::StatusOr<std::vector<FdeRange>> fdes = std::vector<FdeRange>{};
  if (header.data != nullptr) fdes = ReadHeaderTable(header, eh_frame, reader);
  if (fdes.ok() && fdes->empty()) fdes = reader.ReadAll();
  if (!fdes.ok()) return fdes.status();
  const std::unique_ptr<Dwarf_CFI, CfiEnd> cfi(dwarf_getcfi_elf(elf));
  if (cfi == nullptr) return SectionError(eh_frame.name, LibdwError());
  TableWriter writer(eh_frame.name);
  absl::Status status = writer.Walk(cfi.get(), *std::move(fdes));
  if (!status.ok()) return status;
  return writer.Take();
}

absl::StatusOr<UnwindTable> FromDebugFrame(Elf* elf, const Section& debug_frame) {
  const std::unique_ptr<Dwarf, DwarfEnd> dwarf(dwarf_begin_elf(elf, DWARF_C_READ, nullptr));
  if (dwarf == nullptr) return SectionError(debug_frame.name, LibdwError());
  // Owned by `dwarf`.
  Dwarf_CFI* cfi = dwarf_getcfi(dwarf.get());
  if (cfi == nullptr) return SectionError(debug_frame.name, LibdwError());
  FdeReader reader(elf, debug_frame, false);
  absl::StatusOr<std::vector<FdeRange>> fdes = reader.ReadAll();
  if (!fdes.ok()) return fdes.status();
  TableWriter writer(debug_frame.name);
  absl::Status status = writer.Walk(cfi, *std::move(fdes));
  if (!status.ok()) return status;
  return writer.Take();
}

// The file's own call frame information: .eh_frame, .debug_frame or both.
absl::StatusOr<UnwindTable> CompileCfi(Elf* elf) {
  absl::StatusOr<Section> eh_frame = FindSection(elf, ".eh_frame");
  if (!eh_frame.ok()) return eh_frame.status();
  absl::StatusOr<Section> debug_frame = FindSection(elf, ".debug_frame");
  if (!debug_frame.ok()) return debug_frame.status();
  std::optional<absl::StatusOr<UnwindTable>> from_eh_frame;
  if (eh_frame->data != nullptr) {
    absl::StatusOr<Section> eh_frame_hdr = FindSection(elf, ".eh_frame_hdr");
    if (!eh_frame_hdr.ok()) return eh_frame_hdr.status();
    from_eh_frame = FromEhFrame(elf, *eh_frame, *eh_frame_hdr);
  }
  if (debug_frame->data == nullptr) {
    if (from_eh_frame) return *std::move(from_eh_frame);
    return absl::NotFoundError("no call frame information (neither .eh_frame nor .debug_frame)");
  }
  // Built with -fno-asynchronous-unwind-tables -g, a program's .eh_frame
  // holds only what the C start files bring (_start, the PLT) and its own
  // functions are in .debug_frame: the section that describes more wins.
  absl::StatusOr<UnwindTable> from_debug_frame = FromDebugFrame(elf, *debug_frame);
  if (!from_eh_frame || !from_eh_frame->ok()) {
    return from_debug_frame.ok() || !from_eh_frame ? from_debug_frame : *std::move(from_eh_frame);
  }
  if (from_debug_frame.ok() && from_debug_frame->functions > (*from_eh_frame)->functions) {
    // What only .eh_frame describes (_start's outermost rule, the PLT) stays.
    from_debug_frame->rows = Overlay(from_debug_frame->rows, (*from_eh_frame)->rows);
    return from_debug_frame;
  }
  return *std::move(from_eh_frame);
}

}  // namespace

absl::StatusOr<UnwindTable> CompileUnwindTable(int fd) {
  elf_version(EV_CURRENT);
  const std::unique_ptr<Elf, ElfEnd> elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  if (elf == nullptr) {
    return absl::InvalidArgumentError(fmt::format("not readable as ELF: {}", elf_errmsg(-1)));
  }
  if (elf_kind(elf.get()) != ELF_K_ELF) return absl::InvalidArgumentError("not an ELF file");
  GElf_Ehdr header;
  if (gelf_getehdr(elf.get(), &header) == nullptr) {
    return absl::InvalidArgumentError(fmt::format("no ELF header: {}", elf_errmsg(-1)));
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_machine != EM_X86_64) {
    return absl::InvalidArgumentError(
        fmt::format("not an x86-64 ELF file (machine {})", header.e_machine));
  }
  // A relocatable object's addresses are not yet where its code will run.
  if (header.e_type != ET_EXEC && header.e_type != ET_DYN) {
    return absl::InvalidArgumentError(
        fmt::format("not an executable or shared library (ELF type {})", header.e_type));
  }
  absl::StatusOr<UnwindTable> table = CompileCfi(elf.get());
  std::vector<UnwindRow> go_ends = GoStackEnds(elf.get());
  if (go_ends.empty()) return table;
  // A Go program built without DWARF (-ldflags=-w) keeps its frame
  // pointers: they walk it, up to where its stacks end.
  if (!table.ok() && absl::IsNotFound(table.status())) table = UnwindTable{};
  if (table.ok()) table->rows = Overlay(go_ends, table->rows);
  return table;
}

absl::StatusOr<CodeExtent> FdeExtentAt(int fd, uint64_t address) {
  elf_version(EV_CURRENT);
  const std::unique_ptr<Elf, ElfEnd> elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  if (elf == nullptr || elf_kind(elf.get()) != ELF_K_ELF) {
    return absl::InvalidArgumentError(fmt::format("not readable as ELF: {}", elf_errmsg(-1)));
  }
  for (const bool eh_frame : {true, false}) {
    absl::StatusOr<Section> section = FindSection(elf.get(), eh_frame ? ".eh_frame" : ".debug_frame");
    if (!section.ok()) return section.status();
    if (section->data == nullptr) continue;
    FdeReader reader(elf.get(), *section, eh_frame);
    absl::StatusOr<std::vector<FdeRange>> fdes = std::vector<FdeRange>{};
    if (eh_frame) {
      absl::StatusOr<Section> header = FindSection(elf.get(), ".eh_frame_hdr");
      if (!header.ok()) return header.status();
      if (header->data != nullptr) fdes = ReadHeaderTable(*header, *section, reader);
    }
    if (fdes.ok() && fdes->empty()) fdes = reader.ReadAll();
    if (!fdes.ok()) return fdes.status();
    for (const FdeRange& fde : *fdes) {
      if (address < fde.start || address >= fde.end) continue;
      CodeExtent extent{fde.start, fde.end};
      std::unique_ptr<Dwarf, DwarfEnd> dwarf;
      std::unique_ptr<Dwarf_CFI, CfiEnd> owned;
      Dwarf_CFI* cfi = nullptr;
      if (eh_frame) {
        owned.reset(dwarf_getcfi_elf(elf.get()));
        cfi = owned.get();
      } else {
        dwarf.reset(dwarf_begin_elf(elf.get(), DWARF_C_READ, nullptr));
        cfi = dwarf ? dwarf_getcfi(dwarf.get()) : nullptr;  // owned by `dwarf`
      }
      Dwarf_Frame* raw = nullptr;
      if (cfi != nullptr && dwarf_cfi_addrframe(cfi, fde.start, &raw) == 0) {
        const std::unique_ptr<Dwarf_Frame, FrameFree> frame(raw);
        Dwarf_Addr start = 0, end = 0;
        bool signal = false;
        const int return_register = dwarf_frame_info(frame.get(), &start, &end, &signal);
        absl::StatusOr<UnwindRow> row =
            return_register < 0 ? absl::StatusOr<UnwindRow>(absl::UnknownError(LibdwError()))
                                : RuleOf(frame.get(), return_register, signal);
        extent.entry = row.ok() && row->kind == UnwindKind::kCfaRsp && row->cfa_offset == 8;
      }
      return extent;
    }
  }
  return absl::NotFoundError(fmt::format("no FDE covers address {:#x}", address));
}

std::vector<UnwindRow> Overlay(const std::vector<UnwindRow>& primary,
                               const std::vector<UnwindRow>& secondary) {
  std::vector<uint64_t> bounds;
  bounds.reserve(primary.size() + secondary.size());
  for (const UnwindRow& row : primary) bounds.push_back(row.address);
  for (const UnwindRow& row : secondary) bounds.push_back(row.address);
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::vector<UnwindRow> merged;
  for (uint64_t address : bounds) {
    const UnwindRow* first = FindUnwindRow(primary, address);
    const UnwindRow* second = FindUnwindRow(secondary, address);
    UnwindRow row = first != nullptr && first->kind != UnwindKind::kNone ? *first
                    : second != nullptr                                   ? *second
                                                                          : UnwindRow{};
    row.address = address;
    const bool same_rule = !merged.empty() && [&] {
      UnwindRow previous = merged.back();
      previous.address = address;
      return previous == row;
    }();
    if (!same_rule && (!merged.empty() || row.kind != UnwindKind::kNone)) merged.push_back(row);
  }
  return merged;
}

const UnwindRow* FindUnwindRow(const std::vector<UnwindRow>& rows, uint64_t address) {
  const auto after =
      std::upper_bound(rows.begin(), rows.end(), address,
                       [](uint64_t value, const UnwindRow& row) { return value < row.address; });
  return after == rows.begin() ? nullptr : &*(after - 1);
}

}  // namespace loupe::symbols
