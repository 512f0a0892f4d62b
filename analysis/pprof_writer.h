// A StackProfile as a gzip-compressed pprof profile: sample types
// samples/count, cpu/nanoseconds and offcpu/nanoseconds; one location per
// address with its inlined lines; mappings with build ids.
#ifndef LOUPE_ANALYSIS_PPROF_WRITER_H_
#define LOUPE_ANALYSIS_PPROF_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "analysis/stack_profile.h"

namespace loupe::analysis {

struct PprofTimes {
  uint64_t start_realtime_ns = 0;
  uint64_t duration_ns = 0;
  uint64_t sample_period_ns = 0;
};

absl::Status WritePprof(const StackProfile& profile, const PprofTimes& times,
                        const std::string& path);

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PPROF_WRITER_H_
