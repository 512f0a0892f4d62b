// A user stack walked from user space, over hand-made rows and memory: the
// rules of bpf/include/unwind.bpf.h, frame by frame.
#include "daemon/bpf/user_stack_walk.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace loupe::bpf {
namespace {

// pt_regs slots.
constexpr size_t kBp = 4, kAx = 10, kIp = 16, kSp = 19;

// One mapping of a file loaded at 0x400000 (file address = pc - 0x400000).
constexpr uint64_t kBase = 0x400000;
constexpr uint64_t kTrampoline = 0x7fff'f000'0000;

class FakeSource : public UserStackSource {
 public:
  std::optional<loupe_unwind_mapping> MappingAt(uint64_t pc) override {
    if (pc < kBase || pc >= kBase + 0x10000) return std::nullopt;
    return loupe_unwind_mapping{.start = kBase,
                                .end = kBase + 0x10000,
                                .bias = kBase,
                                .first_row = 0,
                                .row_count = static_cast<uint32_t>(rows.size())};
  }
  std::optional<loupe_unwind_row> RowAt(const loupe_unwind_mapping&, uint32_t address) override {
    const loupe_unwind_row* found = nullptr;
    for (const loupe_unwind_row& row : rows) {
      if (row.address <= address) found = &row;
    }
    if (found == nullptr) return std::nullopt;
    return *found;
  }
  std::optional<uint64_t> ReadWord(uint64_t address) override {
    auto it = memory.find(address);
    if (it == memory.end()) return std::nullopt;
    return it->second;
  }

  std::vector<loupe_unwind_row> rows = {
      {.address = 0x1000, .kind = LOUPE_UNWIND_CFA_RSP, .cfa_offset = 16},  // leaf, rbp unsaved
      {.address = 0x2000, .kind = LOUPE_UNWIND_CFA_RBP, .rbp_offset = -16, .cfa_offset = 16},
      {.address = 0x3000, .kind = LOUPE_UNWIND_OUTERMOST},
      {.address = 0x4000, .kind = LOUPE_UNWIND_NONE},  // no CFI: frame pointers
      {.address = 0x5000, .kind = LOUPE_UNWIND_SIGNAL},
      {.address = 0x6000, .kind = LOUPE_UNWIND_CFA_REG, .cfa_register = 0, .cfa_offset = 8},
  };
  std::map<uint64_t, uint64_t> memory;
};

loupe_thread_state Thread(uint64_t pc, uint64_t sp, uint64_t bp) {
  loupe_thread_state thread{};
  thread.regs[kIp] = pc;
  thread.regs[kSp] = sp;
  thread.regs[kBp] = bp;
  return thread;
}

// leaf (CFA = rsp + 16) <- a frame-pointer function <- the outermost frame.
TEST(UserStackWalkTest, RowsLeadFromTheLeafToTheStacksBottom) {
  FakeSource source;
  source.memory = {{0x7008, kBase + 0x2020}, {0x7100, 0}, {0x7108, kBase + 0x3005}};
  const WalkedStack stack = WalkUserStack(Thread(kBase + 0x1010, 0x7000, 0x7100), source);
  EXPECT_EQ(stack.frames, (std::vector<uint64_t>{kBase + 0x1010, kBase + 0x2020, kBase + 0x3005}));
  EXPECT_FALSE(stack.stopped);
}

// A %return probe replaced the leaf's return address with the kernel's
// trampoline: the pending return whose slot it was gives it back.
TEST(UserStackWalkTest, ATrampolineIsReplacedByItsPendingReturn) {
  FakeSource source;
  source.memory = {{0x7008, kTrampoline}, {0x7100, 0}, {0x7108, kBase + 0x3005}};
  loupe_thread_state thread = Thread(kBase + 0x1010, 0x7000, 0x7100);
  thread.trampoline = kTrampoline;
  thread.pending_count = 2;
  thread.pending[0] = {.slot = 0x6ff0, .return_address = kBase + 0x2999};  // a call that longjmp'd past
  thread.pending[1] = {.slot = 0x7008, .return_address = kBase + 0x2020};
  const WalkedStack stack = WalkUserStack(thread, source);
  EXPECT_EQ(stack.frames, (std::vector<uint64_t>{kBase + 0x1010, kBase + 0x2020, kBase + 0x3005}));
  EXPECT_FALSE(stack.stopped);
}

// Code without rows is stepped over by frame pointers; a return address in
// no mapping ends the walk, said to be stopped, the frames so far kept.
TEST(UserStackWalkTest, NoRowMeansFramePointersAndNoMappingStops) {
  FakeSource source;
  source.memory = {{0x7100, 0x7200}, {0x7108, 0x1234'5678}};
  const WalkedStack stack = WalkUserStack(Thread(kBase + 0x4010, 0x7000, 0x7100), source);
  EXPECT_EQ(stack.frames, (std::vector<uint64_t>{kBase + 0x4010}));
  EXPECT_TRUE(stack.stopped);

  // Memory that cannot be read stops it too.
  FakeSource unreadable;
  const WalkedStack cut = WalkUserStack(Thread(kBase + 0x1010, 0x7000, 0x7100), unreadable);
  EXPECT_EQ(cut.frames, (std::vector<uint64_t>{kBase + 0x1010}));
  EXPECT_TRUE(cut.stopped);

  // A leaf no mapping holds is kept (where the thread is), and stops.
  const WalkedStack unknown = WalkUserStack(Thread(0x9000'0000, 0x7000, 0x7100), source);
  EXPECT_EQ(unknown.frames, (std::vector<uint64_t>{0x9000'0000}));
  EXPECT_TRUE(unknown.stopped);
}

// The signal trampoline's frame holds the interrupted registers: the frame
// it leads to is where the code was, marked exact.
TEST(UserStackWalkTest, ASignalFrameLeadsToTheInterruptedCodeExactly) {
  FakeSource source;
  // The handler (the leaf) returns into the trampoline, whose frame at the
  // leaf's CFA (0x7010) is the ucontext.
  constexpr uint64_t kContext = 0x7010;
  source.memory = {{0x7008, kBase + 0x5001},
                   {kContext + 40 + 10 * 8, 0x7100},
                   {kContext + 40 + 15 * 8, 0x9000},
                   {kContext + 40 + 16 * 8, kBase + 0x3005}};
  const WalkedStack stack = WalkUserStack(Thread(kBase + 0x1010, 0x7000, 0x7100), source);
  EXPECT_EQ(stack.frames, (std::vector<uint64_t>{kBase + 0x1010, kBase + 0x5001,
                                                 (kBase + 0x3005) | LOUPE_FRAME_EXACT}));
  EXPECT_FALSE(stack.stopped);
}

// A CFA in another register is known at the leaf only, from its saved
// registers; further out, the walk stops there.
TEST(UserStackWalkTest, ACfaInAnotherRegisterIsFollowedAtTheLeafOnly) {
  FakeSource source;
  source.memory = {{0x7500, kBase + 0x3005}};  // CFA 0x7508: the return address below it
  loupe_thread_state thread = Thread(kBase + 0x6004, 0x7000, 0x7100);
  thread.regs[kAx] = 0x7500;  // DWARF register 0
  const WalkedStack stack = WalkUserStack(thread, source);
  EXPECT_EQ(stack.frames, (std::vector<uint64_t>{kBase + 0x6004, kBase + 0x3005}));
  EXPECT_FALSE(stack.stopped);

  source.memory = {{0x7008, kBase + 0x6010}};
  const WalkedStack outer = WalkUserStack(Thread(kBase + 0x1010, 0x7000, 0x7100), source);
  EXPECT_EQ(outer.frames, (std::vector<uint64_t>{kBase + 0x1010, kBase + 0x6010}));
  EXPECT_TRUE(outer.stopped);
}

}  // namespace
}  // namespace loupe::bpf
