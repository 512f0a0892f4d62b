// The names people use for sources and their settings ("sched,cpu",
// "cycles", "user,kernel"), turned into SourceOptions: one parser for the
// daemon's requests and tracectl's flags.
#ifndef LOUPE_DAEMON_BPF_SOURCE_NAMES_H_
#define LOUPE_DAEMON_BPF_SOURCE_NAMES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daemon/bpf/sources.h"

namespace loupe::bpf {

// Each leaves *options as it is for an empty value.
absl::Status ParseSources(const std::vector<std::string>& names, SourceOptions* options);
absl::Status ParseSampleEvent(std::string_view name, SourceOptions* options);
absl::Status ParseOffCpuStacks(std::string_view list, SourceOptions* options);
absl::Status ParseUnwind(std::string_view name, SourceOptions* options);

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_SOURCE_NAMES_H_
