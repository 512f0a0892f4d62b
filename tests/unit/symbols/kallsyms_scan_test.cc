#include "daemon/symbols/kallsyms_scan.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "daemon/base/scoped_fd.h"
#include "daemon/symbols/kernel_symbols.h"

namespace loupe::symbols {
namespace {

std::string TextLine(uint64_t address, const std::string& name) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(address));
  return std::string(hex) + " t " + name + "\n";
}

std::optional<TextRange> Scan(const std::string& text, std::string_view function) {
  ScopedFd fd(memfd_create("kallsyms", MFD_CLOEXEC));
  EXPECT_EQ(write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  lseek(fd.get(), 0, SEEK_SET);
  return KallsymsFunctionRange(fd.get(), function);
}

TEST(KallsymsScanTest, FunctionEndsAtTheNextTextSymbolWhereverItIsListed) {
  const std::optional<TextRange> range = Scan(
      "ffffffff81000000 T _stext\n"
      "ffffffff81002000 t __schedule\n"
      "ffffffff81005000 D some_data\n"                  // data does not end a function
      "ffffffff81004000 T schedule\n"                   // listed out of order
      "ffffffffc0001000 t __schedule\t[a_module]\n"     // a module's namesake is not it
      "ffffffff81003000 t after_schedule\t[late_mod]\n"  // the nearest text, from a module
      "0000000000032a08 D __preempt_count\n",
      "__schedule");
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->first, 0xffffffff81002000u);
  EXPECT_EQ(range->second, 0xffffffff81003000u);
}

TEST(KallsymsScanTest, HiddenAddressesAndAbsentNamesFindNothing) {
  const std::string hidden =
      "0000000000000000 T _stext\n0000000000000000 t __schedule\n0000000000000000 T schedule\n";
  EXPECT_FALSE(Scan(hidden, "__schedule").has_value());
  EXPECT_FALSE(Scan("ffffffff81000000 T _stext\n", "__schedule").has_value());
  // The last function of the text has no end to report.
  EXPECT_FALSE(Scan("ffffffff81000000 T __schedule\n", "__schedule").has_value());
}

TEST(KallsymsScanTest, LinesSpanningReadsAndAFinalLineWithoutNewline) {
  // Far more than one read's worth, so lines are cut between reads.
  std::string text;
  for (uint64_t i = 0; i < 40000; ++i) {
    text += TextLine(0xffffffff81000000u + i * 0x10, "filler_function_" + std::to_string(i));
  }
  text += "ffffffff90000000 t __schedule\nffffffff90000400 T next_one";  // no newline at the end
  const std::optional<TextRange> range = Scan(text, "__schedule");
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->second, 0xffffffff90000400u);
}

TEST(KallsymsScanTest, MalformedLinesAreSkipped) {
  const std::optional<TextRange> range = Scan(
      "garbage\n\nzzzz T __schedule\nffffffff81000000\nffffffff81000000 T\n"
      "ffffffff81001000 T __schedule\nffffffff81002000 T end\n",
      "__schedule");
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->first, 0xffffffff81001000u);
}

// The live file, streamed by both readers: they agree on __schedule's text
// (where kptr_restrict shows addresses to this user; else both find none).
TEST(KallsymsScanTest, LiveKallsymsAgreesWithTheSymbolizersTable) {
  const std::optional<TextRange> range = KallsymsFunctionRange("__schedule");
  const KernelSymbols kernel = KernelSymbols::Load();
  if (!range) {
    EXPECT_EQ(kernel.Name(0xffffffff81000000u), "");
    return;
  }
  EXPECT_EQ(kernel.Name(range->first), "__schedule");
  EXPECT_EQ(kernel.Name(range->second - 1), "__schedule");
  EXPECT_NE(kernel.Name(range->second), "__schedule");
}

}  // namespace
}  // namespace loupe::symbols
