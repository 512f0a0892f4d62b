#include "daemon/probes/usdt_notes.h"

#include <gtest/gtest.h>
#include <sys/user.h>

#include <cstddef>
#include <cstring>

namespace loupe::probes {
namespace {

// One note in the SystemTap layout: header, "stapsdt", three addresses,
// provider, name, arguments, each part padded to 4 bytes.
std::vector<uint8_t> Note(uint32_t type, std::string_view owner, uint64_t pc, uint64_t semaphore,
                          std::string_view provider, std::string_view name,
                          std::string_view args) {
  std::vector<uint8_t> desc(24);
  std::memcpy(desc.data(), &pc, 8);
  std::memcpy(desc.data() + 16, &semaphore, 8);
  for (std::string_view text : {provider, name, args}) {
    desc.insert(desc.end(), text.begin(), text.end());
    desc.push_back(0);
  }
  std::vector<uint8_t> note(12);
  const uint32_t header[3] = {static_cast<uint32_t>(owner.size() + 1),
                              static_cast<uint32_t>(desc.size()), type};
  std::memcpy(note.data(), header, sizeof header);
  note.insert(note.end(), owner.begin(), owner.end());
  note.push_back(0);
  while (note.size() % 4 != 0) note.push_back(0);
  note.insert(note.end(), desc.begin(), desc.end());
  while (note.size() % 4 != 0) note.push_back(0);
  return note;
}

TEST(UsdtNotesTest, ParsesNotesAndSkipsOtherOwnersAndTypes) {
  std::vector<uint8_t> section = Note(3, "stapsdt", 0x1000, 0x4000, "prov", "first", "8@%rdi");
  for (const auto& other : {Note(3, "GNU", 1, 0, "a", "b", ""), Note(1, "stapsdt", 1, 0, "a", "b", ""),
                            Note(3, "stapsdt", 0x2000, 0, "prov", "second", "")}) {
    section.insert(section.end(), other.begin(), other.end());
  }
  auto notes = ParseUsdtNotes(section);
  ASSERT_TRUE(notes.ok()) << notes.status();
  ASSERT_EQ(notes->size(), 2u);
  EXPECT_EQ((*notes)[0].pc, 0x1000u);
  EXPECT_EQ((*notes)[0].semaphore, 0x4000u);
  EXPECT_EQ((*notes)[0].provider, "prov");
  EXPECT_EQ((*notes)[0].name, "first");
  EXPECT_EQ((*notes)[0].args, "8@%rdi");
  EXPECT_EQ((*notes)[1].name, "second");
  EXPECT_EQ((*notes)[1].args, "");
}

TEST(UsdtNotesTest, MalformedNotesAreErrorsNamingTheNote) {
  const std::vector<uint8_t> good = Note(3, "stapsdt", 1, 0, "p", "n", "");
  std::vector<uint8_t> truncated = good;
  truncated.resize(good.size() - 5);
  std::vector<uint8_t> huge_name = good;
  const uint32_t huge = 0x7fffffff;
  std::memcpy(huge_name.data(), &huge, 4);
  std::vector<uint8_t> short_desc = Note(3, "stapsdt", 1, 0, "", "", "");
  const uint32_t eight = 8;
  std::memcpy(short_desc.data() + 4, &eight, 4);
  std::vector<uint8_t> unterminated = good;
  std::fill(unterminated.begin() + 20 + 24, unterminated.end(), 'x');
  std::vector<uint8_t> two = good;
  two.insert(two.end(), huge_name.begin(), huge_name.end());
  for (const auto& [bytes, why] :
       {std::pair{truncated, "runs past"}, std::pair{huge_name, "name runs past"},
        std::pair{short_desc, "shorter than its three addresses"},
        std::pair{unterminated, "NUL-terminated"}, std::pair{two, "note #1"},
        std::pair{std::vector<uint8_t>{1, 2, 3}, "truncated note header"},
        std::pair{Note(3, "stapsdt", 1, 0, "", "n", ""), "empty provider"}}) {
    auto notes = ParseUsdtNotes(bytes);
    ASSERT_FALSE(notes.ok()) << why;
    EXPECT_NE(notes.status().ToString().find(why), std::string::npos) << notes.status();
  }
}

TEST(UsdtArgsTest, EveryOperandForm) {
  auto args = ParseUsdtArgs(
      "-1@%dil 2@%si -4@%edx 8@%rcx -4@-20(%rbp) 8@16(%rdi) -8@(%rax) -4@$42 4@$0x10 "
      "-4@counter(%rip) 8@table+8(%rip) 1@%r10b");
  ASSERT_TRUE(args.ok()) << args.status();
  ASSERT_EQ(args->size(), 12u);
  const auto& a = *args;
  EXPECT_EQ(a[0].kind, UsdtArgKind::kRegister);
  EXPECT_EQ(a[0].size, 1);
  EXPECT_TRUE(a[0].is_signed);
  EXPECT_EQ(a[0].reg_offset, offsetof(user_regs_struct, rdi));
  EXPECT_EQ(a[1].size, 2);
  EXPECT_FALSE(a[1].is_signed);
  EXPECT_EQ(a[1].reg_offset, offsetof(user_regs_struct, rsi));
  EXPECT_EQ(a[2].reg_offset, offsetof(user_regs_struct, rdx));
  EXPECT_EQ(a[3].reg_offset, offsetof(user_regs_struct, rcx));
  EXPECT_EQ(a[3].size, 8);
  EXPECT_EQ(a[4].kind, UsdtArgKind::kMemory);
  EXPECT_EQ(a[4].value, -20);
  EXPECT_EQ(a[4].reg_offset, offsetof(user_regs_struct, rbp));
  EXPECT_EQ(a[5].value, 16);
  EXPECT_EQ(a[6].kind, UsdtArgKind::kMemory);
  EXPECT_EQ(a[6].value, 0);
  EXPECT_EQ(a[7].kind, UsdtArgKind::kConstant);
  EXPECT_EQ(a[7].value, 42);
  EXPECT_EQ(a[8].value, 16);
  EXPECT_EQ(a[9].kind, UsdtArgKind::kRipRelative);
  EXPECT_EQ(a[9].symbol, "counter");
  EXPECT_EQ(a[9].value, 0);
  EXPECT_EQ(a[10].symbol, "table");
  EXPECT_EQ(a[10].value, 8);
  EXPECT_EQ(a[11].reg_offset, offsetof(user_regs_struct, r10));
  EXPECT_EQ(a[11].size, 1);
  EXPECT_TRUE(ParseUsdtArgs("")->empty());
}

// GCC puts the offset first for a member of a static struct (PostgreSQL's
// checkpoint__done: "-4@40+CheckpointStats(%rip)").
TEST(UsdtArgsTest, RipRelativeOffsetBeforeTheSymbol) {
  auto args = ParseUsdtArgs("-4@40+CheckpointStats(%rip) 8@0x10+table(%rip) 8@x-8(%rip)");
  ASSERT_TRUE(args.ok()) << args.status();
  ASSERT_EQ(args->size(), 3u);
  EXPECT_EQ((*args)[0].kind, UsdtArgKind::kRipRelative);
  EXPECT_EQ((*args)[0].symbol, "CheckpointStats");
  EXPECT_EQ((*args)[0].value, 40);
  EXPECT_EQ((*args)[0].size, 4);
  EXPECT_TRUE((*args)[0].is_signed);
  EXPECT_EQ((*args)[1].symbol, "table");
  EXPECT_EQ((*args)[1].value, 16);
  EXPECT_EQ((*args)[2].symbol, "x");
  EXPECT_EQ((*args)[2].value, -8);
  EXPECT_NE(ParseUsdtArgs("8@40+8(%rip)").status().ToString().find("need a symbol"),
            std::string::npos);
}

TEST(UsdtArgsTest, UnsupportedFormsAreErrorsNamingTheArgument) {
  for (const auto& [text, why] : {
           std::pair{"8@(%rax,%rbx,8)", "indexed"},
           std::pair{"3@%rax", "size must be"},
           std::pair{"16@%rax", "size must be"},
           std::pair{"8@%ah", "unknown or unsupported register"},
           std::pair{"8@%rip", "unknown or unsupported register"},
           std::pair{"8@12(%rip)", "need a symbol"},
           std::pair{"-4@foo", "unsupported operand form"},
           std::pair{"8%rdi", "no '@'"},
           std::pair{"8@$x", "not a number"},
           std::pair{"8@4(%eax)", "64-bit"},
           std::pair{"8@", "empty operand"},
       }) {
    auto args = ParseUsdtArgs(text);
    ASSERT_FALSE(args.ok()) << text;
    EXPECT_NE(args.status().ToString().find(why), std::string::npos) << args.status();
    EXPECT_NE(args.status().ToString().find(text), std::string::npos) << args.status();
  }
  EXPECT_FALSE(ParseUsdtArgs("8@%rdi 8@%rdi 8@%rdi 8@%rdi 8@%rdi 8@%rdi 8@%rdi 8@%rdi 8@%rdi "
                             "8@%rdi 8@%rdi 8@%rdi 8@%rdi")
                   .ok());
}

}  // namespace
}  // namespace loupe::probes
