#include "daemon/bpf/user_stack_walk.h"

#include <algorithm>
#include <array>

namespace loupe::bpf {
namespace {

constexpr uint64_t kLowestUserAddress = 4096;
constexpr uint64_t kHighestUserAddress = 0x00007fffffffffff;

// struct pt_regs's slots (loupe_thread_state.regs).
enum Slot { kR15, kR14, kR13, kR12, kBp, kBx, kR11, kR10, kR9, kR8, kAx, kCx, kDx, kSi, kDi,
            kOrigAx, kIp, kCs, kFlags, kSp, kSs };
// The x86-64 psABI's DWARF register numbers 0-15, as pt_regs slots.
constexpr std::array<Slot, 16> kDwarfRegister = {kAx, kDx, kCx,  kBx,  kSi,  kDi,  kBp,  kSp,
                                                 kR8, kR9, kR10, kR11, kR12, kR13, kR14, kR15};
// Where struct rt_sigframe's ucontext keeps the interrupted rbp, rsp, rip.
constexpr uint64_t kSigframeRbp = 40 + 10 * 8, kSigframeRsp = 40 + 15 * 8,
                   kSigframeRip = 40 + 16 * 8;

class Walk {
 public:
  Walk(const loupe_thread_state& thread, UserStackSource& source)
      : thread_(thread), source_(source), pc_(thread.regs[kIp]), sp_(thread.regs[kSp]),
        bp_(thread.regs[kBp]) {}

  WalkedStack Run() {
    WalkedStack out;
    while (true) {
      if (pc_ == 0) break;  // threads and processes start with a null return address
      if (pc_ < kLowestUserAddress || pc_ > kHighestUserAddress) {
        out.stopped = true;
        break;
      }
      const std::optional<loupe_unwind_mapping> mapping = source_.MappingAt(pc_);
      if (!mapping) {
        // Code no table knows: the leaf is where the thread is; further out, junk.
        if (out.frames.empty()) out.frames.push_back(pc_);
        out.stopped = true;
        break;
      }
      out.frames.push_back(pc_ | (exact_ && !out.frames.empty() ? LOUPE_FRAME_EXACT : 0));
      if (out.frames.size() >= LOUPE_MAX_STACK_DEPTH) break;  // as deep as BPF goes
      leaf_ = out.frames.size() == 1;
      if (!(mapping->row_count == 0 ? StepByFramePointer() : StepByTable(*mapping))) {
        out.stopped = !complete_;
        break;
      }
    }
    return out;
  }

 private:
  // A %return probe's trampoline in place of a return address read from
  // `slot`: the real one from the thread's pending returns, innermost first.
  void RestoreReturnAddress(uint64_t slot) {
    if (thread_.trampoline == 0 || pc_ != thread_.trampoline) return;
    const uint32_t count = std::min<uint32_t>(thread_.pending_count, LOUPE_THREAD_PENDING_MAX);
    for (uint32_t i = next_pending_; i < count; ++i) {
      if (thread_.pending[i].slot != slot) continue;
      pc_ = thread_.pending[i].return_address;
      next_pending_ = i + 1;
      return;
    }
  }

  bool StepByFramePointer() {
    const uint64_t bp = bp_;
    if (bp == 0) {
      complete_ = true;  // where the outermost frame leaves it
      return false;
    }
    if (bp < kLowestUserAddress || bp > kHighestUserAddress) return false;
    const std::optional<uint64_t> pc = source_.ReadWord(bp + 8);
    const std::optional<uint64_t> caller_bp = source_.ReadWord(bp);
    if (!pc || !caller_bp) return false;
    pc_ = *pc;
    RestoreReturnAddress(bp + 8);
    bp_ = *caller_bp;
    sp_ = bp + 16;
    exact_ = false;
    return true;
  }

  bool StepByTable(const loupe_unwind_mapping& mapping) {
    uint64_t address = pc_ - mapping.bias;
    // A return address may follow a call to a function that does not return.
    if (!exact_) address -= 1;
    if (address > 0xffffffffULL) return false;
    const std::optional<loupe_unwind_row> row =
        source_.RowAt(mapping, static_cast<uint32_t>(address));
    if (!row || row->kind == LOUPE_UNWIND_NONE) return StepByFramePointer();
    uint64_t cfa = 0;
    switch (row->kind) {
      case LOUPE_UNWIND_CFA_RSP:
        cfa = sp_ + row->cfa_offset;
        break;
      case LOUPE_UNWIND_CFA_RBP:
        cfa = bp_ + row->cfa_offset;
        break;
      case LOUPE_UNWIND_PLT:
        cfa = sp_ + 8 + ((pc_ & 15) >= 11 ? 8 : 0);
        break;
      case LOUPE_UNWIND_CFA_REG:
        if (!leaf_) return false;  // other registers are known at the leaf only
        cfa = thread_.regs[kDwarfRegister[row->cfa_register & 15]] + row->cfa_offset;
        break;
      case LOUPE_UNWIND_CFA_DEREF_RBP: {
        const std::optional<uint64_t> pointer = source_.ReadWord(bp_ + row->cfa_offset);
        if (!pointer) return false;
        cfa = *pointer;
        break;
      }
      case LOUPE_UNWIND_OUTERMOST:
        complete_ = true;
        return false;
      case LOUPE_UNWIND_SIGNAL: {
        const std::optional<uint64_t> bp = source_.ReadWord(sp_ + kSigframeRbp);
        const std::optional<uint64_t> sp = source_.ReadWord(sp_ + kSigframeRsp);
        const std::optional<uint64_t> pc = source_.ReadWord(sp_ + kSigframeRip);
        if (!bp || !sp || !pc) return false;
        bp_ = *bp;
        sp_ = *sp;
        pc_ = *pc;
        exact_ = true;
        return true;
      }
      default:
        return false;
    }
    if ((row->cfa_register & LOUPE_UNWIND_RBP_FROM_RBP) != 0) {
      const std::optional<uint64_t> bp = source_.ReadWord(bp_ + row->rbp_offset);
      if (!bp) return false;
      bp_ = *bp;
    } else if (row->rbp_offset != 0) {
      const std::optional<uint64_t> bp = source_.ReadWord(cfa + row->rbp_offset);
      if (!bp) return false;
      bp_ = *bp;
    }
    const std::optional<uint64_t> pc = source_.ReadWord(cfa - 8);
    if (!pc) return false;
    pc_ = *pc;
    RestoreReturnAddress(cfa - 8);
    sp_ = cfa;
    exact_ = false;
    return true;
  }

  const loupe_thread_state& thread_;
  UserStackSource& source_;
  uint64_t pc_, sp_, bp_;
  bool exact_ = true;  // pc is where the code was, not a return address
  bool leaf_ = true;
  bool complete_ = false;
  uint32_t next_pending_ = 0;
};

}  // namespace

WalkedStack WalkUserStack(const loupe_thread_state& thread, UserStackSource& source) {
  return Walk(thread, source).Run();
}

}  // namespace loupe::bpf
