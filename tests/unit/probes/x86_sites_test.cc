// Sites in hand-assembled x86-64: return instructions are return sites;
// jumps out (tail calls) are counted, jumps within or into the .cold part
// are not; bytes that do not decode, or a branch into the middle of an
// instruction, are an error rather than a guess; lock-prefixed entries and
// Go prologues are recognised.
#include "daemon/probes/x86_sites.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace loupe::probes {
namespace {

constexpr uint64_t kStart = 0x1000, kCold = 0x3000;

TEST(X86SitesTest, ReturnsAreSitesTailCallsAreCountedJumpsWithinAreNeither) {
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

TEST(X86SitesTest, WithoutAColdPartAJumpThereLeaves) {
  const std::vector<uint8_t> code = {0xe9, 0xfb, 0x1f, 0x00, 0x00};  // jmp 0x3000
  absl::StatusOr<ReturnSites> sites = FindReturnSites({kStart, code}, {});
  ASSERT_TRUE(sites.ok()) << sites.status();
  EXPECT_TRUE(sites->addresses.empty());
  EXPECT_EQ(sites->tail_calls, 1u);
}

TEST(X86SitesTest, BytesThatDoNotDecodeAreAnErrorNamingWhere) {
  const std::vector<uint8_t> code = {0x90, 0x06};  // nop, then push %es: none in 64-bit mode
  absl::StatusOr<ReturnSites> sites = FindReturnSites({kStart, code}, {});
  ASSERT_FALSE(sites.ok());
  EXPECT_NE(sites.status().message().find("0x1001 (+0x1)"), std::string::npos)
      << sites.status();
}

// Hand-written code that jumps over a data byte: read in a straight line,
// the byte swallows the next instruction's first byte, and its immediate
// 0xc3 reads as a ret. The jump's target gives it away.
TEST(X86SitesTest, ABranchIntoTheMiddleOfAnInstructionRefusesTheFunction) {
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
TEST(X86SitesTest, ALockPrefixedFirstInstructionCannotCarryAUprobe) {
  const std::vector<uint8_t> locked = {0xf0, 0x48, 0x83, 0x05, 0x07, 0x32, 0x00, 0x00, 0x01};
  const absl::Status status = CanCarryUprobe({kStart, locked});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("lock-prefixed"), std::string::npos) << status;
  const std::vector<uint8_t> push = {0x55, 0x48, 0x89, 0xe5};
  EXPECT_TRUE(CanCarryUprobe({kStart, push}).ok());
}

// Go's prologue: the stack pointer (or, for a big frame, it less the frame)
// against the goroutine's guard at 16(R14), then the branch to grow.
TEST(X86SitesTest, AGoFunctionsStackCheckEndsAfterItsBranch) {
  const std::vector<uint8_t> small = {
      0x49, 0x3b, 0x66, 0x10,  // 0x1000 cmp 0x10(%r14),%rsp
      0x76, 0x20,              // 0x1004 jbe (to grow the stack)
      0x55,                    // 0x1006 push %rbp
  };
  EXPECT_EQ(GoStackCheckEnd({kStart, small}), std::optional<uint64_t>(0x1006));
  const std::vector<uint8_t> big = {
      0x4c, 0x8d, 0xa4, 0x24, 0x00, 0xf0, 0xff, 0xff,  // 0x1000 lea -0x1000(%rsp),%r12
      0x4d, 0x3b, 0x66, 0x10,                          // 0x1008 cmp 0x10(%r14),%r12
      0x0f, 0x86, 0x00, 0x01, 0x00, 0x00,              // 0x100c jbe
      0x55,                                            // 0x1012 push %rbp
  };
  EXPECT_EQ(GoStackCheckEnd({kStart, big}), std::optional<uint64_t>(0x1012));
  const std::vector<uint8_t> bigger = {
      0x49, 0x89, 0xe4,                          // 0x1000 mov %rsp,%r12
      0x49, 0x81, 0xec, 0xa0, 0x3f, 0x00, 0x00,  // 0x1003 sub $0x3fa0,%r12
      0x0f, 0x82, 0x00, 0x01, 0x00, 0x00,        // 0x100a jb (to grow the stack)
      0x4d, 0x3b, 0x66, 0x10,                    // 0x1010 cmp 0x10(%r14),%r12
      0x0f, 0x86, 0x00, 0x01, 0x00, 0x00,        // 0x1014 jbe
      0x55,                                      // 0x101a push %rbp
  };
  EXPECT_EQ(GoStackCheckEnd({kStart, bigger}), std::optional<uint64_t>(0x101a));
  const std::vector<uint8_t> leaf = {0x48, 0x89, 0xf8, 0xc3};  // mov %rdi,%rax; ret
  EXPECT_EQ(GoStackCheckEnd({kStart, leaf}), std::nullopt);
}

}  // namespace
}  // namespace loupe::probes
