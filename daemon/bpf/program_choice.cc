#include "daemon/bpf/program_choice.h"

namespace loupe::bpf {

bool LoadsProgram(std::string_view name, const ProgramChoice& choice) {
  const auto has = [&](std::string_view part) { return name.find(part) != std::string_view::npos; };
  if (name.ends_with("_raw") == choice.btf_tracepoints) return false;
  if (has("_pcnt") && !choice.preempt_count) return false;
  if (has("_irqd") && choice.preempt_count) return false;
  if (has("_csd_function_") && !choice.csd_tracepoints) return false;
  return choice.sched || !name.starts_with("handle_sched_");
}

}  // namespace loupe::bpf
