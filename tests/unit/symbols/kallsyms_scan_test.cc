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

KallsymsFacts Scan(const std::string& text, std::string_view function,
                   std::string_view variable) {
  ScopedFd fd(memfd_create("kallsyms", MFD_CLOEXEC));
  EXPECT_EQ(write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  lseek(fd.get(), 0, SEEK_SET);
  return ScanKallsyms(fd.get(), function, variable);
}

TEST(KallsymsScanTest, FunctionEndsAtTheNextTextSymbolWhereverItIsListed) {
  const KallsymsFacts facts = Scan(
      "ffffffff81000000 T _stext\n"
      "ffffffff81002000 t __schedule\n"
      "ffffffff81005000 D some_data\n"                  // data does not end a function
      "ffffffff81004000 T schedule\n"                   // listed out of order
      "ffffffffc0001000 t __schedule\t[a_module]\n"     // a module's namesake is not it
      "ffffffff81003000 t after_schedule\t[late_mod]\n"  // the nearest text, from a module
      "0000000000032a08 D __preempt_count\n",
      "__schedule", "__preempt_count");
  ASSERT_TRUE(facts.function_range.has_value());
  EXPECT_EQ(facts.function_range->first, 0xffffffff81002000u);
  EXPECT_EQ(facts.function_range->second, 0xffffffff81003000u);
  EXPECT_TRUE(facts.variable_listed);
}

TEST(KallsymsScanTest, HiddenAddressesAndAbsentNamesFindNothing) {
  const std::string hidden =
      "0000000000000000 T _stext\n0000000000000000 t __schedule\n0000000000000000 T schedule\n";
  const KallsymsFacts facts = Scan(hidden, "__schedule", "__preempt_count");
  EXPECT_FALSE(facts.function_range.has_value());
  EXPECT_FALSE(facts.variable_listed);
  EXPECT_FALSE(Scan("ffffffff81000000 T _stext\n", "__schedule", "x").function_range);
  // The last function of the text has no end to report.
  EXPECT_FALSE(Scan("ffffffff81000000 T __schedule\n", "__schedule", "x").function_range);
}

TEST(KallsymsScanTest, LinesSpanningReadsAndAFinalLineWithoutNewline) {
  // Far more than one read's worth, so lines are cut between reads.
  std::string text;
  for (uint64_t i = 0; i < 40000; ++i) {
    text += TextLine(0xffffffff81000000u + i * 0x10, "filler_function_" + std::to_string(i));
  }
  text += "ffffffff90000000 t __schedule\nffffffff90000400 T next_one";  // no newline at the end
  const KallsymsFacts facts = Scan(text, "__schedule", "next_one");
  ASSERT_TRUE(facts.function_range.has_value());
  EXPECT_EQ(facts.function_range->second, 0xffffffff90000400u);
  EXPECT_TRUE(facts.variable_listed);
}

TEST(KallsymsScanTest, MalformedLinesAreSkipped) {
  const KallsymsFacts facts = Scan(
      "garbage\n\nzzzz T __schedule\nffffffff81000000\nffffffff81000000 T\n"
      "ffffffff81001000 T __schedule\nffffffff81002000 T end\n",
      "__schedule", "none");
  ASSERT_TRUE(facts.function_range.has_value());
  EXPECT_EQ(facts.function_range->first, 0xffffffff81001000u);
}

// The live file, streamed by both readers: they agree on __schedule's text
// (where kptr_restrict shows addresses to this user; else both find none).
TEST(KallsymsScanTest, LiveKallsymsAgreesWithTheSymbolizersTable) {
  const KallsymsFacts facts = ScanKallsyms("__schedule", "__preempt_count");
  const KernelSymbols kernel = KernelSymbols::Load();
  if (!facts.function_range) {
    EXPECT_EQ(kernel.Name(0xffffffff81000000u), "");
    return;
  }
  EXPECT_EQ(kernel.Name(facts.function_range->first), "__schedule");
  EXPECT_EQ(kernel.Name(facts.function_range->second - 1), "__schedule");
  EXPECT_NE(kernel.Name(facts.function_range->second), "__schedule");
}

}  // namespace
}  // namespace loupe::symbols
