// The instructions a function returns by, decoded from hand-assembled
// x86-64: its returns are sites; jumps out of it (tail calls, conditional
// or not) are counted, jumps within it or into its .cold part are not; and
// bytes that do not decode are an error rather than a guess.
#include "daemon/probes/return_sites.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace loupe::probes {
namespace {

constexpr uint64_t kStart = 0x1000, kCold = 0x3000;

TEST(ReturnSitesTest, ReturnsAreSitesTailCallsAreCountedJumpsWithinAreNeither) {
  const std::vector<uint8_t> code = {
      0x55,                                // 0x1000 push %rbp
      0x85, 0xff,                          // 0x1001 test %edi,%edi
      0x74, 0x02,                          // 0x1003 je 0x1007 (within)
      0x5d,                                // 0x1005 pop %rbp
      0xc3,                                // 0x1006 ret
      0x5d,                                // 0x1007 pop %rbp
      0xe9, 0xf4, 0x0f, 0x00, 0x00,        // 0x1008 jmp 0x2001 (a tail call)
      0xe9, 0xee, 0x1f, 0x00, 0x00,        // 0x100d jmp 0x3000 (into .cold)
      0x0f, 0x85, 0xe9, 0x0f, 0x00, 0x00,  // 0x1012 jne 0x2001 (a conditional tail call)
      0xff, 0xe0,                          // 0x1018 jmp *%rax (a switch, most likely)
      0xf3, 0xc3,                          // 0x101a repz ret
      0xc2, 0x08, 0x00,                    // 0x101c ret $8
      0xff, 0x25, 0x00, 0x10, 0x00, 0x00,  // 0x101f jmp *0x1000(%rip) (a GOT slot: a tail call)
      0xff, 0x24, 0xc5, 0x00, 0x40, 0x00, 0x00,  // 0x1025 jmp *0x4000(,%rax,8) (a switch)
      0xff, 0x60, 0x10,                    // 0x102c jmp *0x10(%rax) (a vtable: a tail call)
  };
  const std::vector<uint8_t> cold = {
      0xe8, 0x00, 0x00, 0x00, 0x00,  // 0x3000 call 0x3005
      0xeb, 0xf9,                    // 0x3005 jmp 0x3000 (within .cold)
      0xe9, 0xfb, 0xdf, 0xff, 0xff,  // 0x3007 jmp 0x1007 (back into the function)
      0xc3,                          // 0x300c ret
  };
  absl::StatusOr<ReturnSites> sites = FindReturnSites({kStart, code}, {kCold, cold});
  ASSERT_TRUE(sites.ok()) << sites.status();
  EXPECT_EQ(sites->addresses, (std::vector<uint64_t>{0x1006, 0x101a, 0x101c, 0x300c}));
  EXPECT_EQ(sites->tail_calls, 4u);  // to 0x2001 (jmp, jne), through the GOT and the vtable
}

TEST(ReturnSitesTest, WithoutAColdPartAJumpThereLeaves) {
  const std::vector<uint8_t> code = {0xe9, 0xfb, 0x1f, 0x00, 0x00};  // jmp 0x3000
  absl::StatusOr<ReturnSites> sites = FindReturnSites({kStart, code}, {});
  ASSERT_TRUE(sites.ok()) << sites.status();
  EXPECT_TRUE(sites->addresses.empty());
  EXPECT_EQ(sites->tail_calls, 1u);
}

TEST(ReturnSitesTest, BytesThatDoNotDecodeAreAnErrorNamingWhere) {
  const std::vector<uint8_t> code = {0x90, 0x06};  // nop, then push %es: none in 64-bit mode
  absl::StatusOr<ReturnSites> sites = FindReturnSites({kStart, code}, {});
  ASSERT_FALSE(sites.ok());
  EXPECT_NE(sites.status().message().find("0x1001 (+0x1)"), std::string::npos)
      << sites.status();
}

// Hand-written code that jumps over a data byte: read in a straight line,
// the byte swallows the next instruction's first byte, and its immediate
// 0xc3 reads as a ret. The jump's target gives it away.
TEST(ReturnSitesTest, ABranchIntoTheMiddleOfAnInstructionRefusesTheFunction) {
  const std::vector<uint8_t> code = {
      0xeb, 0x01,                    // 0x1000 jmp 0x1003
      0x04,                          // 0x1002 data (reads as add $imm8,%al)
      0xb9, 0xc3, 0x00, 0x00, 0x00,  // 0x1003 mov $0xc3,%ecx
      0xc3,                          // 0x1008 ret
  };
  absl::StatusOr<ReturnSites> sites = FindReturnSites({kStart, code}, {});
  ASSERT_FALSE(sites.ok());
  EXPECT_NE(sites.status().message().find("0x1003"), std::string::npos) << sites.status();
}

// x86's uprobes refuse a lock-prefixed instruction (ENOTSUPP at attach,
// "Unknown error 524"): said at planning, with the instruction.
TEST(ReturnSitesTest, ALockPrefixedFirstInstructionCannotCarryAUprobe) {
  const std::vector<uint8_t> locked = {0xf0, 0x48, 0x83, 0x05, 0x07, 0x32, 0x00, 0x00, 0x01};
  const absl::Status status = CanCarryUprobe({kStart, locked});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("lock-prefixed"), std::string::npos) << status;
  const std::vector<uint8_t> push = {0x55, 0x48, 0x89, 0xe5};
  EXPECT_TRUE(CanCarryUprobe({kStart, push}).ok());
}

}  // namespace
}  // namespace loupe::probes
