// Which of bpf/sched.bpf.c's programs a session loads. The object holds
// each handler twice (BTF-typed tracepoints, and raw ones with the suffix
// _raw) and the waker-context handlers in two flavours: _pcnt reads the
// per-CPU preempt count, _irqd counts interrupt edges where it cannot be
// read. Every other handler loads in either flavour.
#ifndef LOUPE_DAEMON_BPF_PROGRAM_CHOICE_H_
#define LOUPE_DAEMON_BPF_PROGRAM_CHOICE_H_

#include <string_view>

namespace loupe::bpf {

struct ProgramChoice {
  bool btf_tracepoints = true;
  bool preempt_count = false;    // the _pcnt flavour, else _irqd
  bool csd_tracepoints = false;  // the kernel has csd_function_entry/exit (6.3+)
  bool sched = true;             // the sched source: handle_sched_* load
};

bool LoadsProgram(std::string_view name, const ProgramChoice& choice);

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_PROGRAM_CHOICE_H_
