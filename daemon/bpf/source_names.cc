#include "daemon/bpf/source_names.h"

#include <fmt/format.h>

namespace loupe::bpf {

absl::Status ParseSources(const std::vector<std::string>& names, SourceOptions* options) {
  if (names.empty()) return absl::OkStatus();
  SourceOptions parsed = *options;
  parsed.sched = parsed.cpu = parsed.shim = false;
  for (const std::string& name : names) {
    if (name == "sched") {
      parsed.sched = true;
    } else if (name == "cpu") {
      parsed.cpu = true;
    } else if (name == "shim") {
      parsed.shim = true;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("sources: unknown source '{}' (known: sched, cpu, shim)", name));
    }
  }
  *options = parsed;
  return absl::OkStatus();
}

absl::Status ParseSampleEvent(std::string_view name, SourceOptions* options) {
  if (name.empty()) return absl::OkStatus();
  if (name == "cpu-clock") {
    options->sample_event = SampleEvent::kCpuClock;
  } else if (name == "cycles") {
    options->sample_event = SampleEvent::kCycles;
  } else {
    return absl::InvalidArgumentError(
        fmt::format("sample_event '{}': expected cpu-clock or cycles", name));
  }
  return absl::OkStatus();
}

absl::Status ParseOffCpuStacks(std::string_view list, SourceOptions* options) {
  if (list.empty()) return absl::OkStatus();
  bool user = false, kernel = false;
  for (std::string_view rest = list; !rest.empty() && list != "none";) {
    const std::string_view item = rest.substr(0, rest.find(','));
    rest.remove_prefix(std::min(rest.size(), item.size() + 1));
    if (item == "user") {
      user = true;
    } else if (item == "kernel") {
      kernel = true;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("offcpu_stacks '{}': a list of user and kernel, or none", list));
    }
  }
  options->offcpu_user_stacks = user;
  options->offcpu_kernel_stacks = kernel;
  return absl::OkStatus();
}

absl::Status ParseUnwind(std::string_view name, SourceOptions* options) {
  if (name.empty()) return absl::OkStatus();
  if (name == "cfi") {
    options->unwind = Unwind::kTables;
  } else if (name == "fp") {
    options->unwind = Unwind::kFramePointers;
  } else {
    return absl::InvalidArgumentError(
        fmt::format("unwind '{}': expected cfi (unwind tables) or fp (frame pointers)", name));
  }
  return absl::OkStatus();
}

}  // namespace loupe::bpf
