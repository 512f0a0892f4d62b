// Unwind tables compiled from real CFI: the fixtures of fixtures/ (checked
// against their own machine code), the system's libc and ld.so, and broken
// files.
#include "daemon/symbols/unwind_table.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <link.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "daemon/base/scoped_fd.h"
#include "daemon/base/status_util.h"
#include "tests/support/elf_symbols.h"
#include "tests/support/temp_dir.h"

namespace loupe::symbols {

void PrintTo(const UnwindRow& row, std::ostream* out) {
  *out << "{kind " << static_cast<int>(row.kind) << ", cfa " << row.cfa_offset << ", rbp "
       << row.rbp_offset << ", register " << int{row.cfa_register} << " at 0x" << std::hex
       << row.address << std::dec << "}";
}

namespace {

constexpr char kLibc[] = "/lib/x86_64-linux-gnu/libc.so.6";
constexpr char kLdSo[] = "/lib64/ld-linux-x86-64.so.2";
constexpr uint8_t kRbx = 3;  // DWARF register number
constexpr const char* kShapes[] = {"shapes_leaf", "shapes_big_frame", "shapes_pushes"};

absl::StatusOr<UnwindTable> CompileFile(const std::string& path) {
  const ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("open", path);
  return CompileUnwindTable(fd.get());
}

// The rule at `address`, without the address, to compare with an expectation.
UnwindRow RuleAt(const UnwindTable& table, uint64_t address) {
  const UnwindRow* row = FindUnwindRow(table.rows, address);
  if (row == nullptr) return UnwindRow{.address = 1, .kind = UnwindKind::kNone};
  UnwindRow rule = *row;
  rule.address = 0;
  return rule;
}

UnwindRow Rule(UnwindKind kind, int32_t cfa_offset = 0, int32_t rbp_offset = 0) {
  return {.kind = kind, .cfa_offset = cfa_offset, .rbp_offset = rbp_offset};
}

struct SectionPlace {
  uint64_t address = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Where an ELF file's sections and loaded bytes are, read with libelf.
struct ElfLayout {
  uint64_t entry = 0;
  std::map<std::string, SectionPlace> sections;
  std::vector<SectionPlace> loads;
};

ElfLayout LayoutOf(const std::string& path) {
  ElfLayout layout;
  elf_version(EV_CURRENT);
  const ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  Elf* elf = elf_begin(fd.get(), ELF_C_READ, nullptr);
  GElf_Ehdr header;
  size_t names = 0, count = 0;
  if (elf == nullptr || gelf_getehdr(elf, &header) == nullptr ||
      elf_getshdrstrndx(elf, &names) != 0 || elf_getphdrnum(elf, &count) != 0) {
    if (elf != nullptr) elf_end(elf);
    return layout;
  }
  layout.entry = header.e_entry;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr section;
    if (gelf_getshdr(scn, &section) == nullptr) continue;
    if (const char* name = elf_strptr(elf, names, section.sh_name)) {
      layout.sections[name] = {section.sh_addr, section.sh_offset, section.sh_size};
    }
  }
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr segment;
    if (gelf_getphdr(elf, static_cast<int>(i), &segment) != nullptr && segment.p_type == PT_LOAD) {
      layout.loads.push_back({segment.p_vaddr, segment.p_offset, segment.p_filesz});
    }
  }
  elf_end(elf);
  return layout;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The table of a copy of `path` (in `dir`) whose section `section` has
// another name, so that the compiler does not find it.
absl::StatusOr<UnwindTable> CompileWithSectionHidden(const std::string& path,
                                                     const std::string& section,
                                                     const testing::TempDir& dir) {
  std::string copy = ReadFile(path);
  const SectionPlace names = LayoutOf(path).sections.at(".shstrtab");
  const size_t name = copy.find(section + '\0', names.offset);
  if (name >= names.offset + names.size) {
    return absl::NotFoundError("no section named " + section);
  }
  copy[name + 1] = 'x';
  const std::string hidden = dir.File("hidden" + section);
  WriteFile(hidden, copy);
  return CompileFile(hidden);
}

std::string CodeAt(const std::string& path, const ElfLayout& layout,
                   const testing::AddressRange& range) {
  for (const SectionPlace& load : layout.loads) {
    if (range.start >= load.address && range.end <= load.address + load.size) {
      return ReadFile(path).substr(range.start - load.address + load.offset,
                                   range.end - range.start);
    }
  }
  return "";
}

// What a prologue's machine code says the CFA is after each of its
// instructions (pushes, mov %rsp,%rbp, sub $n,%rsp and register moves):
// the ground truth the compiler's CFI is held to.
struct Prologue {
  std::vector<std::pair<uint64_t, UnwindRow>> rules;  // address -> rule from there
  int pushes = 0;
  int32_t largest_cfa = 0;
};

Prologue Decode(const std::string& code, uint64_t start) {
  Prologue prologue;
  UnwindRow rule = Rule(UnwindKind::kCfaRsp, 8);
  const auto byte = [&](size_t i) -> uint8_t { return i < code.size() ? code[i] : 0; };
  const auto imm32 = [&](size_t i) {
    uint32_t value = 0;
    for (size_t k = 0; k < 4; ++k) value |= uint32_t{byte(i + k)} << (8 * k);
    return static_cast<int32_t>(value);
  };
  size_t at = 0;
  for (;;) {
    prologue.rules.emplace_back(start + at, rule);
    prologue.largest_cfa = std::max(prologue.largest_cfa, rule.cfa_offset);
    const uint8_t op = byte(at);
    if (op >= 0x50 && op <= 0x57) {  // push %rax..%rdi
      rule.cfa_offset += rule.kind == UnwindKind::kCfaRsp ? 8 : 0;
      if (op == 0x55) rule.rbp_offset = -rule.cfa_offset;
      ++prologue.pushes;
      at += 1;
    } else if (op == 0x41 && byte(at + 1) >= 0x50 && byte(at + 1) <= 0x57) {  // push %r8..%r15
      rule.cfa_offset += rule.kind == UnwindKind::kCfaRsp ? 8 : 0;
      ++prologue.pushes;
      at += 2;
    } else if (op == 0x48 && byte(at + 1) == 0x89 && byte(at + 2) == 0xe5) {  // mov %rsp,%rbp
      rule.kind = UnwindKind::kCfaRbp;
      at += 3;
    } else if (op == 0x48 && byte(at + 1) == 0x83 && byte(at + 2) == 0xec) {  // sub $imm8,%rsp
      if (rule.kind == UnwindKind::kCfaRsp) rule.cfa_offset += static_cast<int8_t>(byte(at + 3));
      at += 4;
    } else if (op == 0x48 && byte(at + 1) == 0x81 && byte(at + 2) == 0xec) {  // sub $imm32,%rsp
      if (rule.kind == UnwindKind::kCfaRsp) rule.cfa_offset += imm32(at + 3);
      at += 7;
    } else if (op == 0x89 && byte(at + 1) >= 0xc0) {  // mov %r32,%r32
      at += 2;
    } else if ((op == 0x41 || op == 0x44 || op == 0x45) && byte(at + 1) == 0x89 &&
               byte(at + 2) >= 0xc0) {  // the same with r8d..r15d
      at += 3;
    } else {
      return prologue;
    }
  }
}

// Every shape function's rows agree with its prologue, in `table` read from
// `path`, at the addresses `symbols_from` (the unstripped copy) gives. The
// CFA is checked after every instruction, where rbp was saved only at the
// prologue's end: GCC notes a push of rbp after it, clang after its last push.
void ExpectPrologues(const std::string& path, const UnwindTable& table,
                     const std::string& symbols_from, std::map<std::string, Prologue>* decoded) {
  const auto functions = testing::FunctionRanges(symbols_from);
  const ElfLayout layout = LayoutOf(symbols_from);
  for (const char* name : kShapes) {
    SCOPED_TRACE(path + " " + name);
    const auto found = functions.find(name);
    ASSERT_NE(found, functions.end());
    const std::string code = CodeAt(symbols_from, layout, found->second);
    ASSERT_FALSE(code.empty());
    const Prologue prologue = Decode(code, found->second.start);
    for (const auto& [address, rule] : prologue.rules) {
      const UnwindRow found_rule = RuleAt(table, address);
      EXPECT_EQ(found_rule.kind, rule.kind) << std::hex << "at 0x" << address;
      EXPECT_EQ(found_rule.cfa_offset, rule.cfa_offset) << std::hex << "at 0x" << address;
    }
    const auto& [end, rule] = prologue.rules.back();
    EXPECT_EQ(RuleAt(table, end), rule) << std::hex << "at 0x" << end;
    (*decoded)[name] = prologue;
  }
}

TEST(UnwindTableTest, FindsTheRowThatApplies) {
  const std::vector<UnwindRow> rows = {
      {.address = 0x10, .kind = UnwindKind::kCfaRsp, .cfa_offset = 8}, {.address = 0x20}};
  EXPECT_EQ(FindUnwindRow(rows, 0xf), nullptr);
  EXPECT_EQ(FindUnwindRow(rows, 0x10), &rows[0]);
  EXPECT_EQ(FindUnwindRow(rows, 0x1f), &rows[0]);
  EXPECT_EQ(FindUnwindRow(rows, 0x20), &rows[1]);
  EXPECT_EQ(FindUnwindRow(rows, ~uint64_t{0}), &rows[1]);
  EXPECT_EQ(FindUnwindRow({}, 0x10), nullptr);
}

TEST(UnwindTableTest, FramePointerFunctionsMoveTheCfaToRbp) {
  const auto table = CompileFile(UNWIND_SHAPES_FP);
  ASSERT_TRUE(table.ok()) << table.status();
  std::map<std::string, Prologue> decoded;
  ExpectPrologues(UNWIND_SHAPES_FP, *table, UNWIND_SHAPES_FP, &decoded);
  const auto functions = testing::FunctionRanges(UNWIND_SHAPES_FP);
  const uint64_t start = functions.at("shapes_pushes").start;
  EXPECT_EQ(RuleAt(*table, start), Rule(UnwindKind::kCfaRsp, 8));
  EXPECT_EQ(RuleAt(*table, start + 1), Rule(UnwindKind::kCfaRsp, 16, -16));  // after push %rbp
  EXPECT_EQ(RuleAt(*table, start + 4), Rule(UnwindKind::kCfaRbp, 16, -16));  // after mov %rsp,%rbp
  EXPECT_EQ(decoded["shapes_pushes"].rules.back().second.kind, UnwindKind::kCfaRbp);
}

TEST(UnwindTableTest, FunctionsWithoutFramePointersFollowRsp) {
  for (const char* path : {UNWIND_SHAPES_NOFP, UNWIND_SHAPES_LIB, UNWIND_SHAPES_DEBUG_FRAME,
                           UNWIND_SHAPES_DEBUG_FRAME_EXE}) {
    SCOPED_TRACE(path);
    const auto table = CompileFile(path);
    ASSERT_TRUE(table.ok()) << table.status();
    EXPECT_EQ(table->unsupported, 0u);
    std::map<std::string, Prologue> decoded;
    ExpectPrologues(path, *table, path, &decoded);
    // sub $3984,%rsp (the array less the red zone), and callee-saved pushes:
    // the prologues held the instructions this test is about.
    EXPECT_GT(decoded["shapes_big_frame"].largest_cfa, 3000);
    EXPECT_GE(decoded["shapes_pushes"].pushes, 3);
    EXPECT_NE(decoded["shapes_pushes"].rules.back().second.rbp_offset, 0);
  }
}

TEST(UnwindTableTest, StrippedLibraryKeepsItsTable) {
  ASSERT_TRUE(testing::FunctionRanges(UNWIND_SHAPES_STRIPPED).empty());
  const auto stripped = CompileFile(UNWIND_SHAPES_STRIPPED);
  const auto original = CompileFile(UNWIND_SHAPES_LIB);
  ASSERT_TRUE(stripped.ok()) << stripped.status();
  ASSERT_TRUE(original.ok()) << original.status();
  EXPECT_EQ(stripped->rows, original->rows);
  EXPECT_EQ(stripped->functions, original->functions);
  std::map<std::string, Prologue> decoded;
  ExpectPrologues(UNWIND_SHAPES_STRIPPED, *stripped, UNWIND_SHAPES_LIB, &decoded);
}

// Gaps between FDEs and the end of the last are kNone (no FDE covers them,
// a walker may try frame pointers), never kUnsupported (a rule read and
// not followed, where a walk stops).
TEST(UnwindTableTest, PastAFunctionsEndIsNone) {
  for (const char* path : {UNWIND_SHAPES_NOFP, UNWIND_SHAPES_LIB, UNWIND_SHAPES_DEBUG_FRAME,
                           UNWIND_SHAPES_DEBUG_FRAME_EXE}) {
    SCOPED_TRACE(path);
    const auto table = CompileFile(path);
    ASSERT_TRUE(table.ok()) << table.status();
    const auto functions = testing::FunctionRanges(path);
    // shapes_leaf is followed by alignment padding no FDE covers.
    const testing::AddressRange leaf = functions.at("shapes_leaf");
    ASSERT_NE(leaf.end % 16, 0u);
    EXPECT_EQ(RuleAt(*table, leaf.end - 1), Rule(UnwindKind::kCfaRsp, 8));
    EXPECT_EQ(RuleAt(*table, leaf.end), Rule(UnwindKind::kNone));
    EXPECT_EQ(table->rows.back().kind, UnwindKind::kNone);
    for (const UnwindRow& row : table->rows) {
      EXPECT_NE(row.kind, UnwindKind::kUnsupported) << std::hex << "at 0x" << row.address;
    }
  }
}

// -fno-asynchronous-unwind-tables -g: .eh_frame describes _start and the
// PLT, .debug_frame the program's own functions; the table is compiled from
// the one that describes more, so the functions unwind.
TEST(UnwindTableTest, ProgramWithItsCfiInDebugFrame) {
  const std::string path = UNWIND_SHAPES_DEBUG_FRAME_EXE;
  const ElfLayout layout = LayoutOf(path);
  ASSERT_TRUE(layout.sections.contains(".eh_frame")) << "the start files brought no .eh_frame";
  ASSERT_TRUE(layout.sections.contains(".debug_frame"));
  const auto table = CompileFile(path);
  ASSERT_TRUE(table.ok()) << table.status();
  const auto functions = testing::FunctionRanges(path);
  for (const char* name : {"shapes_leaf", "shapes_big_frame", "shapes_pushes", "main"}) {
    EXPECT_EQ(RuleAt(*table, functions.at(name).start), Rule(UnwindKind::kCfaRsp, 8)) << name;
  }
  EXPECT_GE(table->functions, 4u);  // .debug_frame's: the 3 shapes and main
  EXPECT_EQ(table->unsupported, 0u);
  // What only .eh_frame describes stays: _start's outermost rule.
  EXPECT_EQ(RuleAt(*table, LayoutOf(path).entry), Rule(UnwindKind::kOutermost));
  // The same file with .debug_frame renamed away: .eh_frame alone describes
  // _start and the PLT, none of the functions.
  testing::TempDir dir;
  const auto eh_frame_only = CompileWithSectionHidden(path, ".debug_frame", dir);
  ASSERT_TRUE(eh_frame_only.ok()) << eh_frame_only.status();
  EXPECT_LT(eh_frame_only->functions, table->functions);
  EXPECT_EQ(RuleAt(*eh_frame_only, functions.at("shapes_leaf").start), Rule(UnwindKind::kNone));
}

// One table's rules over another's: the first wins where it has a rule.
TEST(UnwindTableTest, OverlayFillsTheGapsOfTheFirstTableOnly) {
  const UnwindRow rsp8{.address = 0x100, .kind = UnwindKind::kCfaRsp, .cfa_offset = 8};
  const UnwindRow none{.address = 0x140, .kind = UnwindKind::kNone};
  const UnwindRow outermost{.address = 0x80, .kind = UnwindKind::kOutermost};
  const UnwindRow plt{.address = 0x120, .kind = UnwindKind::kPlt, .cfa_offset = 8};
  const UnwindRow second_none{.address = 0x90, .kind = UnwindKind::kNone};
  const UnwindRow late_plt{.address = 0x150, .kind = UnwindKind::kPlt, .cfa_offset = 8};
  const std::vector<UnwindRow> merged =
      Overlay({rsp8, none}, {outermost, second_none, plt, late_plt});
  ASSERT_EQ(merged.size(), 4u);
  EXPECT_EQ(merged[0], outermost);                       // before the first table's rows
  EXPECT_EQ(merged[1], second_none);                     // neither has a rule
  EXPECT_EQ(merged[2], rsp8);                            // the first wins over 0x120's PLT
  EXPECT_EQ(merged[3], (UnwindRow{.address = 0x140, .kind = UnwindKind::kPlt, .cfa_offset = 8}));
  EXPECT_EQ(FindUnwindRow(merged, 0x160)->kind, UnwindKind::kPlt);  // 0x150's: the same rule
}

TEST(UnwindTableTest, LazyPltEntriesAreKPlt) {
  const auto table = CompileFile(UNWIND_SHAPES_LIB);
  ASSERT_TRUE(table.ok()) << table.status();
  const SectionPlace plt = LayoutOf(UNWIND_SHAPES_LIB).sections.at(".plt");
  ASSERT_GE(plt.size, 32u);
  // .plt0: push GOT+8 (6 bytes), then jmp *GOT+16.
  EXPECT_EQ(RuleAt(*table, plt.address), Rule(UnwindKind::kCfaRsp, 16));
  EXPECT_EQ(RuleAt(*table, plt.address + 6), Rule(UnwindKind::kCfaRsp, 24));
  for (uint64_t entry = plt.address + 16; entry < plt.address + plt.size; entry += 16) {
    EXPECT_EQ(RuleAt(*table, entry), Rule(UnwindKind::kPlt, 8));
    EXPECT_EQ(RuleAt(*table, entry + 15), Rule(UnwindKind::kPlt, 8));
  }
}

TEST(UnwindTableTest, ProgramStartIsOutermost) {
  const auto table = CompileFile(UNWIND_SHAPES_NOFP);
  ASSERT_TRUE(table.ok()) << table.status();
  const uint64_t entry = LayoutOf(UNWIND_SHAPES_NOFP).entry;
  ASSERT_EQ(entry, testing::FunctionRanges(UNWIND_SHAPES_NOFP).at("_start").start);
  EXPECT_EQ(RuleAt(*table, entry), Rule(UnwindKind::kOutermost));
}

// A Go program's stacks end where its runtime starts or switches them: a
// walk above those functions read an earlier use of the stack and invented
// frames. Their own symbol (name.abi0) ends the walk, not the wrapper Go's
// linker adds for calls from Go; the program's functions keep their rules.
TEST(UnwindTableTest, GoRuntimeStackSwitchesAreOutermost) {
  const std::string path = GO_RUNTIME_SHAPES;
  const auto table = CompileFile(path);
  ASSERT_TRUE(table.ok()) << table.status();
  const auto functions = testing::FunctionRanges(path);
  for (const char* name : {"runtime.mstart.abi0", "runtime.mcall", "runtime.asmcgocall.abi0"}) {
    const auto& range = functions.at(name);
    EXPECT_EQ(RuleAt(*table, range.start), Rule(UnwindKind::kOutermost)) << name;
    EXPECT_EQ(RuleAt(*table, range.end - 1), Rule(UnwindKind::kOutermost)) << name;
  }
  for (const char* name : {"main.work", "runtime.asmcgocall", "main"}) {
    EXPECT_EQ(RuleAt(*table, functions.at(name).start), Rule(UnwindKind::kCfaRsp, 8)) << name;
  }
  // The same file without the section that says Go's linker wrote it: a
  // C program may name a function so.
  testing::TempDir dir;
  const auto not_go = CompileWithSectionHidden(path, ".go.buildinfo", dir);
  ASSERT_TRUE(not_go.ok()) << not_go.status();
  EXPECT_EQ(RuleAt(*not_go, functions.at("runtime.mstart.abi0").start), Rule(UnwindKind::kCfaRsp, 8));
}

TEST(UnwindTableTest, ErrorsSayWhatIsWrong) {
  testing::TempDir dir;
  WriteFile(dir.File("text"), "#!/bin/sh\nexit 0\n");
  WriteFile(dir.File("empty"), "");
  const auto text = CompileFile(dir.File("text"));
  ASSERT_FALSE(text.ok());
  EXPECT_NE(MessageOf(text.status()).find("not an ELF file"), std::string::npos) << text.status();
  const auto empty = CompileFile(dir.File("empty"));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(MessageOf(empty.status()).find("ELF"), std::string::npos) << empty.status();
  const auto none = CompileFile(UNWIND_SHAPES_NO_CFI);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(MessageOf(none.status()).find("no call frame information"), std::string::npos)
      << none.status();
  EXPECT_FALSE(CompileUnwindTable(-1).ok());
}

// Overwrites `bytes` at `offset` of a copy of the shapes library.
class CorruptCopy {
 public:
  CorruptCopy() : original_(ReadFile(UNWIND_SHAPES_LIB)), layout_(LayoutOf(UNWIND_SHAPES_LIB)) {}

  absl::StatusOr<UnwindTable> With(uint64_t offset, const std::string& bytes) {
    std::string copy = original_;
    copy.replace(offset, bytes.size(), bytes);
    WriteFile(dir_.File("lib.so"), copy);
    return CompileFile(dir_.File("lib.so"));
  }
  const SectionPlace& section(const std::string& name) const { return layout_.sections.at(name); }

 private:
  testing::TempDir dir_;
  std::string original_;
  ElfLayout layout_;
};

TEST(UnwindTableTest, EhFrameHdrErrorsAndFallback) {
  CorruptCopy copy;
  const auto original = CompileFile(UNWIND_SHAPES_LIB);
  ASSERT_TRUE(original.ok()) << original.status();
  const SectionPlace header = copy.section(".eh_frame_hdr");
  // Version, 3 encodings, .eh_frame's address, the count, then (start, FDE) pairs.
  const auto outside = copy.With(header.offset + 16, std::string("\xff\xff\xff\x7f", 4));
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(MessageOf(outside.status()).find(".eh_frame_hdr: entry 0 points at"), std::string::npos)
      << outside.status();
  const auto count = copy.With(header.offset + 8, std::string("\xff\xff\xff\x00", 4));
  ASSERT_FALSE(count.ok());
  EXPECT_NE(MessageOf(count.status()).find(".eh_frame_hdr: its table of 16777215 FDEs"),
            std::string::npos)
      << count.status();
  const auto version = copy.With(header.offset, std::string("\x02", 1));
  ASSERT_FALSE(version.ok());
  EXPECT_NE(MessageOf(version.status()).find(".eh_frame_hdr: version 2, not 1"), std::string::npos)
      << version.status();
  // No table (its encoding DW_EH_PE_omit): .eh_frame itself is walked.
  const auto walked = copy.With(header.offset + 3, std::string("\xff", 1));
  ASSERT_TRUE(walked.ok()) << walked.status();
  EXPECT_EQ(walked->rows, original->rows);
  EXPECT_EQ(walked->functions, original->functions);
}

TEST(UnwindTableTest, CorruptEhFrameIsAnErrorNotACrash) {
  CorruptCopy copy;
  const SectionPlace eh_frame = copy.section(".eh_frame");
  std::mt19937 random(20240611);
  int errors = 0, tables = 0;
  for (int i = 0; i < 400; ++i) {
    const uint64_t offset = eh_frame.offset + random() % eh_frame.size;
    const auto table =
        copy.With(offset, std::string(1 + random() % 4, static_cast<char>(random())));
    if (table.ok()) {
      ++tables;
      continue;
    }
    ++errors;
    EXPECT_NE(MessageOf(table.status()).find(".eh_frame"), std::string::npos) << table.status();
  }
  std::cout << "corrupt .eh_frame: " << errors << " errors, " << tables << " tables\n";
  EXPECT_GT(errors, 0);
}

// True if `a` and `b` name the same file.
bool SameFile(const char* a, const char* b) {
  struct stat first, second;
  return stat(a, &first) == 0 && stat(b, &second) == 0 && first.st_ino == second.st_ino &&
         first.st_dev == second.st_dev;
}

// Where the kernel returns to from this process's signal handlers (glibc's
// __restore_rt, set by sigaction as SA_RESTORER), as an address of libc.
bool SignalTrampolineInLibc(uint64_t* address) {
  struct sigaction action = {}, previous = {};
  action.sa_handler = [](int) {};
  if (sigaction(SIGUSR2, &action, &previous) != 0) return false;
  struct {
    uint64_t handler, flags, restorer, mask;
  } kernel = {};
  const long read = syscall(SYS_rt_sigaction, SIGUSR2, nullptr, &kernel, sizeof kernel.mask);
  sigaction(SIGUSR2, &previous, nullptr);
  Dl_info info;
  link_map* map = nullptr;
  if (read != 0 || kernel.restorer == 0 ||
      dladdr1(reinterpret_cast<void*>(kernel.restorer), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0 ||
      map == nullptr || !SameFile(info.dli_fname, kLibc)) {
    return false;
  }
  *address = kernel.restorer - map->l_addr;
  return true;
}

// Where a lazily bound library enters ld.so to bind a function on its first
// call (_dl_runtime_resolve_xsavec, _xsave or _fxsave, as the CPU allows;
// ld.so has no symbol that names it): the third word of the library's
// .got.plt, as an address of ld.so's file. False where ld.so binds
// everything at load (LD_BIND_NOW).
bool LazyBindingTrampolineInLdSo(uint64_t* address) {
  const ElfLayout layout = LayoutOf(UNWIND_SHAPES_LIB);
  const auto got = layout.sections.find(".got.plt");
  void* library = dlopen(UNWIND_SHAPES_LIB, RTLD_LAZY | RTLD_LOCAL);
  if (library == nullptr) return false;
  link_map* map = nullptr;
  uint64_t resolver = 0;
  if (got != layout.sections.end() && got->second.size >= 24 &&
      dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr) {
    resolver = reinterpret_cast<const uint64_t*>(map->l_addr + got->second.address)[2];
  }
  dlclose(library);
  Dl_info info;
  link_map* ld_so = nullptr;
  if (resolver == 0 ||
      dladdr1(reinterpret_cast<void*>(resolver), &info, reinterpret_cast<void**>(&ld_so),
              RTLD_DL_LINKMAP) == 0 ||
      ld_so == nullptr || !SameFile(info.dli_fname, kLdSo)) {
    return false;
  }
  *address = resolver - ld_so->l_addr;
  return true;
}

std::map<UnwindKind, size_t> KindsOf(const UnwindTable& table) {
  std::map<UnwindKind, size_t> kinds;
  for (const UnwindRow& row : table.rows) ++kinds[row.kind];
  return kinds;
}

TEST(UnwindTableTest, SystemLibc) {
  if (access(kLibc, R_OK) != 0) GTEST_SKIP() << kLibc << " is not here";
  const auto table = CompileFile(kLibc);
  ASSERT_TRUE(table.ok()) << table.status();
  auto kinds = KindsOf(*table);
  std::cout << kLibc << ": " << table->rows.size() << " rows, " << table->functions
            << " functions, " << table->unsupported << " unsupported, "
            << kinds[UnwindKind::kSignal] << " signal, " << kinds[UnwindKind::kOutermost]
            << " outermost, " << kinds[UnwindKind::kPlt] << " PLT rows\n";
  EXPECT_GT(table->functions, 1000u);
  EXPECT_LT(table->unsupported * 100, table->rows.size());
  // Rules not followed are kUnsupported rows (adjacent ones merged), not kNone.
  EXPECT_LE(kinds[UnwindKind::kUnsupported], table->unsupported);
  EXPECT_EQ(kinds[UnwindKind::kUnsupported] > 0, table->unsupported > 0);
  EXPECT_GE(kinds[UnwindKind::kSignal], 1u);
  EXPECT_GE(kinds[UnwindKind::kOutermost], 1u);  // clone and clone3's child side
  uint64_t trampoline = 0;
  if (!SignalTrampolineInLibc(&trampoline)) {
    std::cout << "the signal trampoline is not in " << kLibc << ": not checked\n";
    return;
  }
  EXPECT_EQ(RuleAt(*table, trampoline), Rule(UnwindKind::kSignal)) << std::hex << trampoline;
}

// ld.so's lazy binding trampoline keeps the CFA in rbx while it saves the
// registers (push %rbx; mov %rsp,%rbx; and $-64,%rsp; ...): kCfaRegister,
// which a walker follows at the leaf. Before, it was a rule not followed,
// and the first call of every lazily bound function was cut there.
TEST(UnwindTableTest, SystemLdSoCfaFromRbx) {
  if (access(kLdSo, R_OK) != 0) GTEST_SKIP() << kLdSo << " is not here";
  const auto table = CompileFile(kLdSo);
  ASSERT_TRUE(table.ok()) << table.status();
  size_t from_rbx = 0, from_others = 0;
  for (const UnwindRow& row : table->rows) {
    if (row.kind != UnwindKind::kCfaRegister) continue;
    EXPECT_LE(row.cfa_register, 15) << std::hex << "at 0x" << row.address;
    EXPECT_NE(row.cfa_register, 6) << std::hex << "rbp is kCfaRbp, at 0x" << row.address;
    EXPECT_NE(row.cfa_register, 7) << std::hex << "rsp is kCfaRsp, at 0x" << row.address;
    ++(row.cfa_register == kRbx ? from_rbx : from_others);
  }
  auto kinds = KindsOf(*table);
  std::cout << kLdSo << ": " << table->rows.size() << " rows, " << table->functions
            << " functions, " << from_rbx << " CFA from rbx, " << from_others
            << " from other registers, " << table->unsupported << " unsupported ("
            << kinds[UnwindKind::kUnsupported] << " rows)\n";
  // The three trampolines (xsavec, xsave, fxsave), and the TLS descriptor ones.
  EXPECT_GE(from_rbx, 3u);
  EXPECT_LE(table->unsupported, 10u);
  EXPECT_LT(table->unsupported * 100, table->rows.size());

  uint64_t trampoline = 0;
  if (!LazyBindingTrampolineInLdSo(&trampoline)) {
    std::cout << "the lazy binding trampoline was not found: checked by its rows only\n";
    return;
  }
  const ElfLayout layout = LayoutOf(kLdSo);
  const std::string code = CodeAt(kLdSo, layout, {trampoline, trampoline + 4});
  ASSERT_EQ(code, std::string("\x53\x48\x89\xe3", 4))
      << std::hex << "at 0x" << trampoline << ": not push %rbx; mov %rsp,%rbx";
  // The PLT pushed two words before jumping here.
  EXPECT_EQ(RuleAt(*table, trampoline), Rule(UnwindKind::kCfaRsp, 24)) << std::hex << trampoline;
  EXPECT_EQ(RuleAt(*table, trampoline + 1), Rule(UnwindKind::kCfaRsp, 32));
  EXPECT_EQ(RuleAt(*table, trampoline + 4),
            (UnwindRow{.kind = UnwindKind::kCfaRegister, .cfa_offset = 32, .cfa_register = kRbx}))
      << std::hex << "at 0x" << trampoline + 4;
}

// Sizes for the BPF map that will hold these tables.
TEST(UnwindTableTest, FiguresForSystemFiles) {
  for (const char* path :
       {kLibc, kLdSo, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/bin/python3.11"}) {
    if (access(path, R_OK) != 0) {
      std::cout << path << ": not here\n";
      continue;
    }
    const auto began = std::chrono::steady_clock::now();
    const auto table = CompileFile(path);
    const auto took = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - began)
                          .count();
    ASSERT_TRUE(table.ok()) << path << ": " << table.status();
    auto kinds = KindsOf(*table);
    std::cout << path << ": " << table->rows.size() << " rows (" << kinds[UnwindKind::kCfaRsp]
              << " rsp, " << kinds[UnwindKind::kCfaRbp] << " rbp, " << kinds[UnwindKind::kNone]
              << " none, " << kinds[UnwindKind::kPlt] << " plt, " << kinds[UnwindKind::kSignal]
              << " signal, " << kinds[UnwindKind::kOutermost] << " outermost, "
              << kinds[UnwindKind::kCfaRegister] << " other register, "
              << kinds[UnwindKind::kUnsupported] << " unsupported), " << table->functions
              << " functions, " << table->unsupported << " unsupported, " << took / 1000.0
              << " ms\n";
    const std::string name = std::string(path).substr(std::string(path).rfind('/') + 1);
    RecordProperty(name + "_rows", std::to_string(table->rows.size()));
    RecordProperty(name + "_functions", std::to_string(table->functions));
    RecordProperty(name + "_unsupported", std::to_string(table->unsupported));
    RecordProperty(name + "_compile_us", std::to_string(took));
  }
}

}  // namespace
}  // namespace loupe::symbols
