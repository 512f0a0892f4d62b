// Which sched programs a session loads, for each flavour the kernel allows.
#include "daemon/bpf/program_choice.h"

#include <gtest/gtest.h>

namespace loupe::bpf {
namespace {

TEST(ProgramChoiceTest, EveryHandlerLoadsInEitherFlavourAndTheContextHandlersInTheirsOnly) {
  const ProgramChoice irq_depth{.preempt_count = false, .csd_tracepoints = true};
  const ProgramChoice preempt_count{.preempt_count = true, .csd_tracepoints = true};
  for (const ProgramChoice& choice : {irq_depth, preempt_count}) {
    EXPECT_TRUE(LoadsProgram("handle_sched_switch", choice));
    EXPECT_TRUE(LoadsProgram("handle_sched_process_fork", choice));
    EXPECT_FALSE(LoadsProgram("handle_sched_switch_raw", choice));
  }
  EXPECT_TRUE(LoadsProgram("handle_sched_wakeup_irqd", irq_depth));
  EXPECT_TRUE(LoadsProgram("handle_sched_irq_softirq_entry_irqd", irq_depth));
  EXPECT_FALSE(LoadsProgram("handle_sched_wakeup_pcnt", irq_depth));
  EXPECT_TRUE(LoadsProgram("handle_sched_wakeup_pcnt", preempt_count));
  EXPECT_FALSE(LoadsProgram("handle_sched_wakeup_irqd", preempt_count));
  EXPECT_FALSE(LoadsProgram("handle_sched_irq_softirq_entry_irqd", preempt_count));
}

TEST(ProgramChoiceTest, RawTracepointsCsdAndTheSchedSourceAreChosenToo) {
  const ProgramChoice raw{.btf_tracepoints = false};
  EXPECT_TRUE(LoadsProgram("handle_sched_switch_raw", raw));
  EXPECT_TRUE(LoadsProgram("handle_sched_wakeup_irqd_raw", raw));
  EXPECT_FALSE(LoadsProgram("handle_sched_switch", raw));
  // Before 6.3 there is no csd_function tracepoint to attach to.
  EXPECT_FALSE(LoadsProgram("handle_sched_irq_csd_function_entry_irqd", {}));
  EXPECT_TRUE(LoadsProgram("handle_sched_irq_csd_function_entry_irqd", {.csd_tracepoints = true}));
  // Without the sched source only the other handlers load.
  EXPECT_FALSE(LoadsProgram("handle_sched_switch", {.sched = false}));
  EXPECT_TRUE(LoadsProgram("handle_process_exec", {.sched = false}));
}

}  // namespace
}  // namespace loupe::bpf
